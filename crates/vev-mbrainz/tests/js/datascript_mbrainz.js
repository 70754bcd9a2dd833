// DataScript's side of crates/vev-mbrainz/tests/datascript.rs.
//
// Usage: NODE_PATH=<dir holding datascript> node datascript_mbrainz.js <fixture.json>
// The fixture: {"schema": EDN, "keyword_attrs": [...], "datoms": [[e, attr, value], ...],
// "queries": [{"name", "query": text, "inputs": [EDN, ...], "feeds_itself": bool}, ...]}.
// Prints one line per query, in order: `ok <milliseconds> <result as EDN>` or
// `error <milliseconds> <message>`.
//
// Keywords: DataScript's JS API stores what JS hands it, and JS has no keywords, so the
// attributes, the schema, the keyword values and the inputs (the rule set among them) are
// made ClojureScript values with DataScript's own EDN reader: `edn()` binds an EDN literal
// with `ground` in a query and hands the value to a JS predicate (as
// crates/vev/tests/js/datascript_query.js does). Results come back through the JS API, which
// turns keywords into their bare names (`:artist.type/person` is "person").
//
// A query that feeds itself (query 8) runs a second time with its first result as its last
// input, a relation of the result's rows, as vev_mbrainz::run does.
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
  d.q(`[:find ?x :in ?capture :where [(ground ${text}\n) ?x] [(?capture ?x)]]`, capture);
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
const db = d.init_db(
  fixture.datoms.map(([e, a, v]) => [e, keyword(a), keywordAttrs.has(a) ? keyword(v) : v]),
  schema,
);

/// A JS API result as EDN: arrays as vectors, numbers as JS prints them.
function toEdn(x) {
  if (x === null || x === undefined) return "nil";
  if (typeof x === "number") return Number.isInteger(x) ? String(x) : x.toExponential();
  if (typeof x === "string") return JSON.stringify(x);
  if (typeof x === "boolean") return String(x);
  if (Array.isArray(x)) return "[" + x.map(toEdn).join(" ") + "]";
  return String(x);
}

for (const q of fixture.queries) {
  const started = process.hrtime.bigint();
  let line;
  try {
    const inputs = q.inputs.map(edn);
    let result = d.q(q.query, db, ...inputs);
    if (q.feeds_itself) {
      inputs[inputs.length - 1] = edn(toEdn(result));
      result = d.q(q.query, db, ...inputs);
    }
    line = `ok ${elapsed(started)} ${toEdn(result)}`;
  } catch (e) {
    line = `error ${elapsed(started)} ` + String(e && e.message).replace(/\s+/g, " ");
  }
  process.stdout.write(line + "\n");
}

function elapsed(started) {
  return Number((process.hrtime.bigint() - started) / 1000000n);
}
