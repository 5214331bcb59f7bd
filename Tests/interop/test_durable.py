"""Interop tests for durable history (docs/durability.md) with the third-party `websockets`
client: receipts after storage, idempotent retries, `since` resume, `history` paging."""
import json

from websockets.asyncio.client import connect

from test_native import handshake, recv_json, recv_until, run, server, subscribe, url  # noqa: F401 (fixture)


def test_receipt_idempotent_retry_resume_and_paging(server):
    async def scenario():
        async with connect(url(server)) as writer:
            await handshake(writer)
            # The same message_id three times: one message, three identical receipts.
            receipts = []
            for callback in (1, 2, 3):
                await writer.send(json.dumps({"type": "publish", "room": "py-durable", "message": "hello",
                                              "message_id": "py-1", "callback": callback}))
                receipts.append(await recv_until(writer, lambda m, c=callback: m.get("callback") == c))
            assert receipts[0]["offset"] == 1 and isinstance(receipts[0]["id"], str)
            assert all(r["id"] == receipts[0]["id"] and r["offset"] == 1 for r in receipts)
            for n in range(2, 31):
                await writer.send(json.dumps({"type": "publish", "room": "py-durable", "message": "m%d" % n,
                                              "callback": 100 + n}))
            for n in range(2, 31):
                await recv_until(writer, lambda m, c=100 + n: m.get("callback") == c)

            async with connect(url(server)) as reader:
                await handshake(reader)
                await reader.send(json.dumps({"type": "subscribe", "room": "py-durable", "since": 25, "callback": 1}))
                assert await recv_json(reader) == {"callback": 1}
                replayed = [await recv_json(reader) for _ in range(5)]
                assert [m["offset"] for m in replayed] == [26, 27, 28, 29, 30]
                assert all(m["type"] == "publish" and "callback" not in m for m in replayed)
                await writer.send(json.dumps({"type": "publish", "room": "py-durable", "message": "live"}))
                live = await recv_json(reader)
                assert live["offset"] == 31 and live["message"] == "live"

                await reader.send(json.dumps({"type": "history", "room": "py-durable", "limit": 20, "callback": 2}))
                page = await recv_until(reader, lambda m: m.get("callback") == 2)
                assert [m["offset"] for m in page["messages"]] == list(range(12, 32))
                assert page["has_more"] is True
                await reader.send(json.dumps({"type": "history", "room": "py-durable", "before": 12,
                                              "limit": 20, "callback": 3}))
                older = await recv_until(reader, lambda m: m.get("callback") == 3)
                assert [m["offset"] for m in older["messages"]] == list(range(1, 12))
                assert older["has_more"] is False
                assert older["messages"][0]["message"] == "hello"

    run(scenario())
