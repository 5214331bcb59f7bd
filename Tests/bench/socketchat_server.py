"""The SocketChat event set (docs/protocols.md, "Socket.IO") on python-socketio + uvicorn (ASGI): the
reference server `parley bench --door socketio` is compared against.

    .venv-bench/bin/python Tests/bench/socketchat_server.py --port 5000

Semantics as in the classic SocketChat server: every emit goes to every socket.
"""
import argparse
import datetime

import socketio
import uvicorn

sio = socketio.AsyncServer(async_mode="asgi", cors_allowed_origins="*", logger=False, engineio_logger=False)
app = socketio.ASGIApp(sio, socketio_path="socket.io")

users = []          # [{"id", "nickname", "isConnected"}]
typing = {}         # nickname -> 1
nick_of = {}        # sid -> nickname


@sio.on("connectUser")
async def connect_user(sid, nickname):
    user = next((u for u in users if u["nickname"] == nickname), None)
    if user is None:
        user = {"id": sid, "nickname": nickname, "isConnected": True}
        users.append(user)
    else:
        user["id"], user["isConnected"] = sid, True
    nick_of[sid] = nickname
    await sio.emit("userList", users)
    await sio.emit("userConnectUpdate", user)


@sio.on("chatMessage")
async def chat_message(sid, nickname, message):
    typing.pop(nickname, None)
    await sio.emit("userTypingUpdate", typing)
    date = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    await sio.emit("newChatMessage", [nickname, message, date])


@sio.on("startType")
async def start_type(sid, nickname):
    typing[nickname] = 1
    await sio.emit("userTypingUpdate", typing)


@sio.on("stopType")
async def stop_type(sid, nickname):
    typing.pop(nickname, None)
    await sio.emit("userTypingUpdate", typing)


@sio.on("exitUser")
async def exit_user(sid, nickname):
    users[:] = [u for u in users if u["nickname"] != nickname]
    await sio.emit("userExitUpdate", nickname)


@sio.event
async def disconnect(sid, *args):
    nickname = nick_of.pop(sid, None)
    if nickname is None:
        return
    for u in users:
        if u["nickname"] == nickname:
            u["isConnected"] = False
    typing.pop(nickname, None)
    await sio.emit("userList", users)
    await sio.emit("userExitUpdate", nickname)
    await sio.emit("userTypingUpdate", typing)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    args = parser.parse_args()
    print(f"socketchat listening on {args.host}:{args.port}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
