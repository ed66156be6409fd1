// Shared helpers of the Node scenario clients. Modules (mongodb, mongoose) come from tests/node/node_modules.
// Every client is run as `node PROGRAM URI DBNAME [MODE]`; it drops DBNAME, seeds it, runs its workload and exits 0.
'use strict';
const path = require('path');
const { createRequire } = require('module');

const nodeRequire = createRequire(path.join(__dirname, '..', 'node', 'package.json'));

// { uri, dbName }, and `mode` when the client takes a MODE, one of `modes`.
function args(modes) {
  const [uri, dbName, mode, ...rest] = process.argv.slice(2);
  if (!uri || !dbName || rest.length || (modes ? !modes.includes(mode) : mode !== undefined)) {
    console.error(`usage: node ${path.basename(process.argv[1])} URI DBNAME${modes ? ` ${modes.join('|')}` : ''}`);
    process.exit(2);
  }
  return { uri, dbName, mode };
}

function check(cond, message) {
  if (!cond) throw new Error(message);
}

// Runs an async main and exits 0, or 1 with a clear message.
function run(main) {
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(`scenario failed: ${err && err.stack ? err.stack : err}`);
      process.exit(1);
    },
  );
}

// customers (integer _id) and orders (integer customerId -> customers._id); any 20 consecutive
// orders have 20 distinct customers.
async function seedShop(db, { customers = 30, orders = 60 } = {}) {
  await db.collection('customers').insertMany(
    Array.from({ length: customers }, (_, c) => ({ _id: c + 1, name: `Customer ${c + 1}`, tier: c % 3 ? 'basic' : 'gold' })));
  await db.collection('orders').insertMany(
    Array.from({ length: orders }, (_, o) => ({
      _id: o + 1, customerId: ((o * 7) % customers) + 1, total: 10 + (o % 13) * 5, createdAt: new Date(Date.UTC(2024, 0, 1) + o * 3600e3),
    })));
}

// A Node driver client's life: connects to URI, drops DBNAME, seeds it with `seed(db)` (the shop by
// default), runs `work(db)`, closes, exits (see run). work's result is printed.
function runShop(work, seed = seedShop) {
  run(async () => {
    const { uri, dbName } = args();
    const client = await nodeRequire('mongodb').MongoClient.connect(uri);
    try {
      const db = client.db(dbName);
      await db.dropDatabase();
      await seed(db);
      console.log(await work(db));
    } finally {
      await client.close();
    }
  });
}

module.exports = { nodeRequire, args, check, run, seedShop, runShop };
