// The Node driver's part of the soak test (bench/soak.py starts it): `node bench/soak_node.js URI DBNAME SECONDS [LOOPS]`.
// LOOPS (default 2) concurrent loops share one MongoClient (maxPoolSize 4) and run a mixed workload on the
// collections bench/soak.py seeds (items, orders, events, customers; this client's documents carry w >= 100)
// until SECONDS have passed; one more loop opens a fresh MongoClient, runs two commands and closes it, again
// and again. Every 2 s and at the end it prints `progress OPS ERRORS EXPECTED` (totals so far; EXPECTED:
// deliberate duplicate-key inserts refused), and the first errors to stderr. Exits 0 unless it could not run.
'use strict';
const path = require('path');
const { createRequire } = require('module');

const nodeRequire = createRequire(path.join(__dirname, '..', 'tests', 'node', 'package.json'));
const { MongoClient } = nodeRequire('mongodb');

const [uri, dbName, secondsArg, loopsArg] = process.argv.slice(2);
if (!uri || !dbName || !secondsArg) {
  console.error('usage: node bench/soak_node.js URI DBNAME SECONDS [LOOPS]');
  process.exit(2);
}
const deadline = Date.now() + Number(secondsArg) * 1000;
const loops = Number(loopsArg || 2);

const ITEMS = 1000;
const ORDERS = 300;
const EVENTS_KEPT = 500;
const CUSTOMERS = 200;
const CATS = ['books', 'games', 'garden', 'kitchen', 'music', 'tools', 'toys', 'sports'];
const KINDS = ['view', 'click', 'cart', 'buy', 'search'];
const STATUSES = ['new', 'paid', 'shipped', 'delivered', 'cancelled'];

let ops = 0;
let errors = 0;
let expected = 0;
let reported = 0;

// A small seeded generator, so runs are alike.
function rng(seed) {
  let x = seed >>> 0 || 1;
  const next = () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x / 4294967296;
  };
  return {
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    below: (n) => Math.floor(next() * n),
    pick: (list) => list[Math.floor(next() * list.length)],
    chance: (p) => next() < p,
  };
}

function progress() {
  console.log(`progress ${ops} ${errors} ${expected}`);
}

function fail(where, err) {
  errors += 1;
  if (reported < 5) {
    reported += 1;
    console.error(`soak-node ${where}: ${err && err.stack ? err.stack : err}`);
  }
}

function itemDoc(r, w, _id) {
  return {
    _id, w, name: `item ${_id}`, cat: r.pick(CATS), score: r.int(0, 1000), price: r.int(100, 50000) / 100,
    tags: Array.from({ length: r.int(0, 4) }, () => r.pick(KINDS)),
    attrs: { color: r.pick(['red', 'green', 'blue']), size: r.int(1, 50) },
    blurb: 'lorem ipsum '.repeat(r.int(1, 60)), updated: new Date(), v: 0,
  };
}

function orderDoc(r, w, _id) {
  return {
    _id, w, customerId: r.below(CUSTOMERS), status: r.pick(STATUSES),
    lines: Array.from({ length: r.int(1, 6) }, () => ({ sku: r.below(10000), qty: r.int(1, 5), price: r.int(1, 99) })),
    at: new Date(),
  };
}

async function worker(db, w) {
  const r = rng(w * 7919);
  const base = w * 1000000;
  const items = db.collection('items');
  const orders = db.collection('orders');
  const events = db.collection('events');
  let seq = 0;
  const itemId = () => base + r.below(ITEMS);
  const table = [
    [12, 'insertEvent', async () => {
      seq += 1;
      await events.insertOne({ w, seq, kind: r.pick(KINDS), payload: 'y'.repeat(r.int(10, 3000)), at: new Date() });
      if (seq % 100 === 0) await events.deleteMany({ w, seq: { $lt: seq - EVENTS_KEPT } });
    }],
    [3, 'insertEvents', async () => {
      const docs = Array.from({ length: r.int(2, 20) }, () => ({ w, seq: ++seq, kind: r.pick(KINDS), at: new Date() }));
      await events.insertMany(docs, { ordered: r.chance(0.5) });
    }],
    [8, 'upsertItem', async () => {
      const _id = itemId();
      await items.replaceOne({ _id }, itemDoc(r, w, _id), { upsert: true });
    }],
    [12, 'updateItem', async () => {
      await items.updateOne({ _id: itemId() }, {
        $set: { score: r.int(0, 1000), updated: new Date(), 'attrs.size': r.int(1, 50) },
        $inc: { v: 1 },
        $push: { tags: { $each: [r.pick(KINDS)], $slice: -8 } },
      });
    }],
    [12, 'findItems', async () => {
      const q = { w, cat: r.pick(CATS), score: { $gte: r.int(0, 900) } };
      if (r.chance(0.5)) {
        await items.find(q, { projection: { name: 1, score: 1, price: 1, _id: 0 } }).sort({ score: -1 }).limit(20).toArray();
      } else {
        await items.find(q).sort({ price: 1, _id: 1 }).skip(r.int(0, 5)).limit(10).toArray();
      }
    }],
    [8, 'findOneItem', async () => { await items.findOne({ _id: itemId() }); }],
    [5, 'cursorEvents', async () => {
      const cursor = events.find({ w }, { projection: { payload: 0 } }).sort({ seq: -1 }).batchSize(r.int(3, 10));
      const stopAt = r.int(10, 80);
      let n = 0;
      try {
        for await (const _doc of cursor) { // getMores; stopping early leaves a killCursors to send
          n += 1;
          if (n >= stopAt) break;
        }
      } finally {
        await cursor.close();
      }
    }],
    [5, 'countItems', async () => { await items.countDocuments({ w, cat: r.pick(CATS) }); }],
    [4, 'groupItems', async () => {
      await items.aggregate([
        { $match: { w } },
        { $group: { _id: '$cat', n: { $sum: 1 }, avg: { $avg: '$score' }, top: { $max: '$price' } } },
        { $sort: { n: -1 } },
      ]).toArray();
    }],
    [4, 'lookupOrders', async () => {
      await orders.aggregate([
        { $match: { w, status: r.pick(STATUSES) } }, { $sort: { at: -1 } }, { $limit: 10 },
        { $lookup: { from: 'customers', localField: 'customerId', foreignField: '_id', as: 'customer' } },
        { $project: { status: 1, lines: 1, 'customer.name': 1 } },
      ]).toArray();
    }],
    [6, 'upsertOrder', async () => {
      const _id = base + r.below(ORDERS);
      await orders.replaceOne({ _id }, orderDoc(r, w, _id), { upsert: true });
    }],
    [2, 'deleteItems', async () => {
      const ids = Array.from({ length: r.int(1, 10) }, itemId);
      await items.deleteMany({ w, _id: { $in: ids } });
    }],
    [2, 'bulk', async () => {
      seq += 1;
      await events.bulkWrite([
        { insertOne: { document: { w, seq, kind: 'bulk', at: new Date() } } },
        { deleteOne: { filter: { w, seq: { $lt: seq - EVENTS_KEPT } } } },
      ], { ordered: true });
      await items.bulkWrite([{ updateOne: { filter: { _id: itemId() }, update: { $inc: { v: 1 }, $set: { updated: new Date() } } } }],
        { ordered: false });
      const _id = base + r.below(ORDERS);
      await orders.bulkWrite([{ replaceOne: { filter: { _id }, replacement: orderDoc(r, w, _id), upsert: true } }]);
    }],
    [2, 'distinct', async () => { await orders.distinct('status', { w }); }],
    [1, 'duplicate', async () => {
      const _id = itemId();
      await items.replaceOne({ _id }, itemDoc(r, w, _id), { upsert: true });
      try {
        await items.insertOne({ _id, w });
      } catch (err) {
        if (err && err.code === 11000) {
          expected += 1;
          return;
        }
        throw err;
      }
      throw new Error(`inserting the existing _id ${_id} was not refused`);
    }],
  ];
  const total = table.reduce((sum, [weight]) => sum + weight, 0);
  while (Date.now() < deadline) {
    let x = r.below(total);
    let entry = table[0];
    for (const e of table) {
      if (x < e[0]) { entry = e; break; }
      x -= e[0];
    }
    try {
      await entry[2]();
      ops += 1;
    } catch (err) {
      fail(`w${w} ${entry[1]}`, err);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

async function churn() {
  const r = rng(4242);
  while (Date.now() < deadline) {
    const client = new MongoClient(uri, { maxPoolSize: 1, serverSelectionTimeoutMS: 15000 });
    try {
      await client.connect();
      await client.db('admin').command({ ping: 1 });
      ops += 1;
      await client.db(dbName).collection('customers').findOne({ _id: r.below(CUSTOMERS) });
      ops += 1;
    } catch (err) {
      fail('churn', err);
    } finally {
      await client.close().catch((err) => fail('churn close', err));
    }
    await new Promise((resolve) => setTimeout(resolve, r.int(500, 1500)));
  }
}

async function main() {
  const client = new MongoClient(uri, { maxPoolSize: 4, serverSelectionTimeoutMS: 15000, socketTimeoutMS: 60000 });
  const timer = setInterval(progress, 2000);
  try {
    await client.connect();
    const db = client.db(dbName);
    await Promise.all([...Array.from({ length: loops }, (_, i) => worker(db, 100 + i)), churn()]);
  } finally {
    clearInterval(timer);
    await client.close();
    progress();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    fail('main', err);
    progress();
    process.exit(1);
  },
);
