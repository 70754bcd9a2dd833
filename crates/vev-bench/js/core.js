// DataScript's side of Vev's `core` benchmark.
//
// Usage: node core.js <fixture.json> [reps]
// Loads the fixture Vev wrote, transacts all people in one transaction and in one
// transaction each (fresh connection per repetition, one untimed warm-up run each), and
// prints {"one_tx_ms": [...], "many_tx_ms": [...], ...} on stdout.
//
// DataScript's JS API (src/datascript/js.cljs): attribute names are plain strings ("name"),
// schema keys and values that start with ":" become keywords (":db/index"), and entity maps
// keep their string keys except ":db/id". Values cannot be keywords through this API, so
// :sex is the string "male"/"female" here.
"use strict";

const fs = require("fs");
const d = require("datascript");
const dsVersion = require("datascript/package.json").version;

const [fixturePath, repsArg] = process.argv.slice(2);
if (!fixturePath) {
  console.error("usage: node core.js <fixture.json> [reps]");
  process.exit(2);
}
const reps = Number(repsArg || 5);
const fixture = JSON.parse(fs.readFileSync(fixturePath, "utf8"));

const attrs = ["name", "last-name", "sex", "age", "salary"];
const schema = {};
for (const a of attrs) schema[a] = { ":db/index": true };

// Transaction data is built before the clock starts, as Vev's is.
const people = fixture.people.map((p) => {
  const e = {};
  for (const a of attrs) e[a] = p[a];
  return e;
});
const single = people.map((p) => [p]);

function datomCount(conn) {
  return d.datoms(d.db(conn), ":eavt").length;
}

function oneTx() {
  const conn = d.create_conn(schema);
  const start = process.hrtime.bigint();
  d.transact(conn, people);
  const elapsed = Number(process.hrtime.bigint() - start) / 1e6;
  if (datomCount(conn) !== people.length * attrs.length) throw new Error("one tx: wrong datom count");
  return elapsed;
}

function manyTx() {
  const conn = d.create_conn(schema);
  const start = process.hrtime.bigint();
  for (const tx of single) d.transact(conn, tx);
  const elapsed = Number(process.hrtime.bigint() - start) / 1e6;
  if (datomCount(conn) !== people.length * attrs.length) throw new Error("many tx: wrong datom count");
  return elapsed;
}

function repeat(f) {
  f();
  const out = [];
  for (let i = 0; i < reps; i++) out.push(f());
  return out;
}

const result = {
  datascript_version: dsVersion,
  node_version: process.version,
  people: people.length,
  one_tx_ms: repeat(oneTx),
  many_tx_ms: repeat(manyTx),
};
process.stdout.write(JSON.stringify(result) + "\n");
