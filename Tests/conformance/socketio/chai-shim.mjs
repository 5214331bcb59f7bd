// The part of chai (and chai-string) the Engine.IO and Socket.IO protocol test suites use:
// expect(x).to.eql(y), .to.startsWith(s), .to.have.all.keys(...), .to.be.a(type),
// .to.be.oneOf(list). Failures throw AssertionError, as chai's do.
import assert from "node:assert/strict";

function normalize(value) {
  // Compare binary data by its bytes, as chai's deep equality does.
  if (value instanceof ArrayBuffer) return { bytes: Array.from(new Uint8Array(value)) };
  if (ArrayBuffer.isView(value)) return { bytes: Array.from(new Uint8Array(value.buffer, value.byteOffset, value.byteLength)) };
  return value;
}

function expect(actual) {
  const assertions = {
    eql(expected) {
      assert.deepStrictEqual(normalize(actual), normalize(expected));
    },
    startsWith(prefix) {
      assert.ok(typeof actual === "string" && actual.startsWith(prefix),
        `expected ${JSON.stringify(actual)} to start with ${JSON.stringify(prefix)}`);
    },
    a(type) {
      assert.equal(typeof actual, type, `expected ${JSON.stringify(actual)} to be a ${type}`);
    },
    oneOf(list) {
      assert.ok(list.includes(actual), `expected ${JSON.stringify(actual)} to be one of ${JSON.stringify(list)}`);
    },
  };
  const have = {
    all: {
      keys(...keys) {
        const expected = (keys.length === 1 && Array.isArray(keys[0]) ? keys[0] : keys).slice().sort();
        assert.deepStrictEqual(Object.keys(actual).sort(), expected);
      },
    },
  };
  const chain = { ...assertions, be: assertions, have };
  return { to: chain };
}

export default { expect, use() {} };
