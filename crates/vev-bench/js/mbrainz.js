// DataScript's side of Vev's `mbrainz` benchmark.
//
// Usage: node --max-old-space-size=MB mbrainz.js <mbrainz-fixture.json>
// Reads the fixture `vev-bench mbrainz` wrote (timing parameters, DataScript's schema, the
// rule set, the queries) and the datoms file it names (one JSON array [e, "ns/attr", v] per
// line, Vev's datoms with entity ids as the peers share them). Builds the database with
// `d.init_db(datoms, schema)`, DataScript's documented bulk path (the datoms go straight
// into its sorted indexes, no transaction processing); only that call is timed. Then runs each
// query untimed at least `warmup` times and for at least `warmup_ms`, then `reps` times timed
// (fewer if the timed runs pass `budget_ms`, but at least 3), as js/query.js does.
//
// Output, one JSON line each: {"engine", "version", "node_version"}; {"load_ms", "datoms"};
// per query {"start": name} as it begins (the parent's watchdog names a query that hangs),
// then {"name", "rows", "samples_ms", "result"} with the last timed run's rows in the
// benchmark's cell form (strings, numbers, {"uuid": text}; keywords come back from the JS
// API as their name, a string), or {"name", "skipped": why}. Progress goes to stderr.
//
// The timed call is the plain JS API, `d.q(text, db, ...inputs)`, as js/query.js explains;
// query 8 is two calls, the second with the first's result (JS arrays) as its relation.
"use strict";

const fs = require("fs");
const readline = require("readline");
const d = require("datascript");
const dsVersion = require("datascript/package.json").version;

const [fixturePath] = process.argv.slice(2);
if (!fixturePath) {
  console.error("usage: node mbrainz.js <mbrainz-fixture.json>");
  process.exit(2);
}
const fixture = JSON.parse(fs.readFileSync(fixturePath, "utf8"));

/// Written synchronously: a pipe's `process.stdout.write` is asynchronous, and a runner that
/// dies (out of memory in a query) would lose the lines still queued.
function emit(doc) {
  fs.writeSync(1, JSON.stringify(doc) + "\n");
}

/// The ClojureScript value of an EDN literal (see js/query.js).
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

const decode = {
  string: (v) => v,
  long: (v) => v,
  ref: (v) => v,
  keyword: (v) => keyword(v),
  uuid: (v) => edn(`#uuid "${v}"`),
};

async function readDatoms() {
  const rows = [];
  const lines = readline.createInterface({
    input: fs.createReadStream(fixture.datoms_path),
    crlfDelay: Infinity,
  });
  for await (const line of lines) {
    if (line.length === 0) continue;
    const [e, a, v] = JSON.parse(line);
    rows.push([e, keyword(a), decode[fixture.attributes[a]](v)]);
  }
  return rows;
}

function quantile(sorted, q) {
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(Math.max(rank, 1), sorted.length) - 1];
}

/// Warm `run` up, then time up to `reps` calls; the last result and the samples.
function measure(run) {
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
  return { result, samples };
}

/// A result cell as the benchmark compares it.
function cell(x) {
  if (x !== null && typeof x === "object") return { uuid: String(x) };
  return x;
}

/// A query result as rows of cells: a relation as is, a collection or a scalar as one-cell rows.
function rowsOf(result) {
  if (result === null || result === undefined) return [];
  if (!Array.isArray(result)) return [[cell(result)]];
  return result.map((r) => (Array.isArray(r) ? r.map(cell) : [cell(r)]));
}

async function main() {
  emit({ engine: "datascript", version: dsVersion, node_version: process.version });
  const datoms = await readDatoms();
  const schema = edn(fixture.schemas.datascript);
  const start = process.hrtime.bigint();
  const db = d.init_db(datoms, schema);
  const loadMs = Number(process.hrtime.bigint() - start) / 1e6;
  console.error(`datascript: init_db of ${datoms.length} datoms in ${loadMs.toFixed(0)} ms`);
  emit({ load_ms: loadMs, datoms: datoms.length });
  datoms.length = 0;

  const rules = edn(fixture.rules.datascript);
  for (const spec of fixture.queries) {
    const skip = (spec.cannot_run || {}).datascript;
    if (skip) {
      emit({ name: spec.name, skipped: skip });
      continue;
    }
    emit({ start: spec.name });
    const inputs = [];
    if (spec.rules) inputs.push(rules);
    if (spec.input !== null) inputs.push(edn(spec.input));
    const text = spec.query;
    const run = spec.feeds_itself
      ? () => {
          const first = d.q(text, db, ...inputs);
          return d.q(text, db, ...inputs.slice(0, -1), first);
        }
      : () => d.q(text, db, ...inputs);
    const { result, samples } = measure(run);
    const rows = rowsOf(result);
    const sorted = [...samples].sort((a, b) => a - b);
    console.error(
      `datascript: ${spec.name} ${rows.length} rows, p50 ${quantile(sorted, 0.5).toFixed(3)} ms (${samples.length} runs)`
    );
    emit({ name: spec.name, rows: rows.length, samples_ms: samples, result: rows });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
