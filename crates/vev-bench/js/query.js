// DataScript's side of Vev's `query` benchmark.
//
// Usage: node query.js <query-fixture.json>
// Reads the databases, DataScript's schema and the queries that `vev-bench query` wrote, builds
// each database once, and runs each query untimed at least `warmup` times and for at least
// `warmup_ms`, then `reps` times timed (fewer if the timed runs pass `budget_ms`, but at least 3). Prints one JSON line first,
// {"engine", "version"}, then one per query: {"name", "rows", "median_ms", "p95_ms",
// "samples_ms"}. Progress goes to stderr.
//
// Keywords: DataScript's JS API stores what JS hands it, and JS has no keywords, so data built
// from JS objects would have the attribute "name" where the query says :name. To run the very
// same query text as the other engines, the fixture is built with real keywords, obtained
// from DataScript's own EDN reader: `edn()` below binds an EDN literal with `ground` in a
// query and hands the ClojureScript value to a JS predicate. The same trick gives the
// schema, the rules and the other inputs as ClojureScript data. `d.init_db` takes datoms and
// the schema as they are. What is timed is the plain JS API call, `d.q(text, db, ...inputs)`
// or `d.pull(db, pattern, root)`: it reads the query text (DataScript caches the parsed query,
// not the read) and converts the result to JS arrays, as every JS caller pays.
"use strict";

const fs = require("fs");
const d = require("datascript");
const dsVersion = require("datascript/package.json").version;

const [fixturePath] = process.argv.slice(2);
if (!fixturePath) {
  console.error("usage: node query.js <query-fixture.json>");
  process.exit(2);
}
const fixture = JSON.parse(fs.readFileSync(fixturePath, "utf8"));

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

const schema = edn(fixture.schemas.datascript);
const decode = {
  string: (v) => v,
  long: (v) => v,
  ref: (v) => v,
  keyword: (v) => keyword(v),
};

function buildDb(name) {
  const rows = fixture.dbs[name];
  const start = process.hrtime.bigint();
  const datoms = rows.map(([e, a, v]) => [e, keyword(a), decode[fixture.attributes[a]](v)]);
  const db = d.init_db(datoms, schema);
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  console.error(`datascript: built ${name} (${rows.length} datoms) in ${ms.toFixed(0)} ms`);
  return db;
}

/// Entities in a pull result: the map itself and every map under ":follows".
function pulled(m) {
  if (m === null || typeof m !== "object") return 0;
  const below = m[":follows"] || [];
  return 1 + below.reduce((n, c) => n + pulled(c), 0);
}

function quantile(sorted, q) {
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(Math.max(rank, 1), sorted.length) - 1];
}

function median(sorted) {
  const n = sorted.length;
  return n % 2 === 1 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

/// Warm `run` up, then time up to `reps` calls; `count` gives the last result's rows.
function measure(run, count) {
  const warmStart = process.hrtime.bigint();
  for (let i = 0; i < fixture.warmup || Number(process.hrtime.bigint() - warmStart) / 1e6 < fixture.warmup_ms; i++) {
    run();
  }
  const samples = [];
  let result;
  let spent = 0;
  while (samples.length < fixture.reps && (samples.length < 3 || spent < fixture.budget_ms)) {
    const start = process.hrtime.bigint();
    result = run();
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    samples.push(ms);
    spent += ms;
  }
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    rows: count(result),
    median_ms: median(sorted),
    p95_ms: quantile(sorted, 0.95),
    samples_ms: samples,
  };
}

const dbs = new Map();
function dbFor(name) {
  if (!dbs.has(name)) dbs.set(name, buildDb(name));
  return dbs.get(name);
}

process.stdout.write(JSON.stringify({ engine: "datascript", version: dsVersion, node_version: process.version }) + "\n");
for (const spec of fixture.queries) {
  const db = dbFor(spec.db);
  let result;
  if (spec.pull !== undefined) {
    const { pull: pattern, root } = spec;
    result = measure(() => d.pull(db, pattern, root), pulled);
  } else {
    const text = spec.query;
    const inputs = spec.inputs.map(edn);
    result = measure(() => d.q(text, db, ...inputs), (rows) => rows.length);
  }
  console.error(`datascript: ${spec.name} ${result.rows} rows, median ${result.median_ms.toFixed(3)} ms`);
  process.stdout.write(JSON.stringify({ name: spec.name, ...result }) + "\n");
}
