// DataScript's side of crates/vev/tests/query_datascript.rs.
//
// Usage: NODE_PATH=<dir holding datascript> node datascript_query.js <fixture.json>
// The fixture: {"schema": EDN, "keyword_attrs": [...], "dbs": [[[e, attr, value], ...], ...],
// "queries": [{"db": index, "query": text, "inputs": [EDN, ...]}, ...]}.
// Prints one line per query, in order: `ok <result as EDN>` or `error <message>`.
//
// Keywords: DataScript's JS API stores what JS hands it, and JS has no keywords, so the
// datoms, the schema and the inputs are made ClojureScript values with DataScript's own EDN
// reader: `edn()` binds an EDN literal with `ground` in a query and hands the value to a JS
// predicate (the same trick as crates/vev-bench/js/query.js). Results come back through the
// JS API, which turns keywords into their bare names.
"use strict";

const fs = require("fs");
const d = require("datascript");

const fixture = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));

/// The ClojureScript value of an EDN literal.
function edn(text) {
  let value;
  let calls = 0;
  const capture = (x) => {
    value = x;
    calls++;
    return true;
  };
  d.q(`[:find ?x :in ?capture :where [(ground ${text}) ?x] [(?capture ?x)]]`, capture);
  if (calls !== 1) throw new Error(`edn(): ${calls} values for ${text}`);
  return value;
}

const keywords = new Map();
function keyword(name) {
  if (!keywords.has(name)) keywords.set(name, edn(`:${name}`));
  return keywords.get(name);
}

const schema = edn(fixture.schema);
const keywordAttrs = new Set(fixture.keyword_attrs);
const dbs = fixture.dbs.map((datoms) =>
  d.init_db(
    datoms.map(([e, a, v]) => [e, keyword(a), keywordAttrs.has(a) ? keyword(v) : v]),
    schema,
  ),
);

/// A JS API result as EDN: arrays as vectors, anything from ClojureScript as it prints.
function toEdn(x) {
  if (x === null || x === undefined) return "nil";
  if (typeof x === "number") return Number.isInteger(x) ? String(x) : x.toExponential();
  if (typeof x === "string") return JSON.stringify(x);
  if (typeof x === "boolean") return String(x);
  if (Array.isArray(x)) return "[" + x.map(toEdn).join(" ") + "]";
  return String(x);
}

for (const q of fixture.queries) {
  let line;
  try {
    const inputs = q.inputs.map(edn);
    line = "ok " + toEdn(d.q(q.query, dbs[q.db], ...inputs));
  } catch (e) {
    line = "error " + String(e && e.message).replace(/\s+/g, " ");
  }
  process.stdout.write(line + "\n");
}
