// node-postgres against `vev serve`: the statements a Node application sends, each result
// printed as one JSON line for the Rust test (tests/drivers.rs) to check.
// Usage: node node_pg.js PORT
'use strict';
const { Client } = require('pg');

async function main() {
  const port = Number(process.argv[2]);
  const client = new Client({ host: '127.0.0.1', port, user: 'vev', database: 'app' });
  await client.connect();
  const out = (name, value) => console.log(JSON.stringify({ name, value }));
  await client.query('CREATE TABLE item (id int PRIMARY KEY, name text, price double precision, made timestamp)');
  // Parameterized statements go through the extended protocol with text parameters.
  await client.query('INSERT INTO item VALUES ($1, $2, $3, $4), ($5, $6, $7, $8)',
    [1, 'apple', 0.5, '2024-01-31 12:00:00', 2, 'pear', null, '2024-02-01 08:30:00.25']);
  let r = await client.query('SELECT id, name, price, made FROM item WHERE id = $1', [1]);
  out('select', r.rows.map(row => [row.id, row.name, row.price, row.made.toISOString()]));
  r = await client.query('SELECT count(*) AS n, sum(id) AS s FROM item');
  out('aggregate', [r.rows[0].n, r.rows[0].s]);
  r = await client.query('SELECT name FROM item WHERE price IS NULL');
  out('null', r.rows.map(row => row.name));
  await client.query('BEGIN');
  await client.query('UPDATE item SET price = price * 2 WHERE id = $1', [1]);
  r = await client.query('SELECT price FROM item WHERE id = 1');
  out('in-transaction', r.rows[0].price);
  await client.query('ROLLBACK');
  r = await client.query('SELECT price FROM item WHERE id = 1');
  out('after-rollback', r.rows[0].price);
  try {
    await client.query('INSERT INTO item (id, name) VALUES ($1, $2)', [2, 'dup']);
    out('duplicate', 'no error');
  } catch (e) {
    out('duplicate', e.code);
  }
  try {
    await client.query('SELECT * FROM nowhere');
  } catch (e) {
    out('unknown-table', e.code);
  }
  r = await client.query('SELECT name FROM item ORDER BY id DESC LIMIT 1');
  out('after-errors', r.rows[0].name);
  await client.end();
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
