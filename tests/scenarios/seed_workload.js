// W2 (Node driver): the seeds' four operations, planted as in seed_workload.py (48 order pages, 20 added
// lines, 8 order histories, 4 address updates, a user's think time apart, shuffled).
// mongotap should list the four operations with these counts (within 5%) and give orders -> customers
// (customerId -> _id) and orders -> products (lines.productId -> _id) the verdict extended_reference.
'use strict';
const { nodeRequire, args, check, run } = require('./common');

const THINK_MS = 60;
const PLAN = [['show', 48], ['add_line', 20], ['history', 8], ['address', 4]];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A small seeded generator: the same plan on every run.
function rng(seed) {
  let s = seed;
  return (n) => { s = (s * 1103515245 + 12345) % 2147483648; return s % n; };
}

run(async () => {
  const { uri, dbName } = args();
  const client = await nodeRequire('mongodb').MongoClient.connect(uri);
  try {
    const db = client.db(dbName);
    await db.dropDatabase();
    const customers = Array.from({ length: 12 }, (_, c) => ({ _id: 1000 + c, name: `Customer ${c}`, address: { city: 'Lyon' } }));
    const products = Array.from({ length: 30 }, (_, p) => ({ _id: `P-${String(p).padStart(3, '0')}`, name: `Product ${p}`, price: 5 + p }));
    await db.collection('customers').insertMany(customers);
    await db.collection('products').insertMany(products);
    await db.collection('orders').insertMany(Array.from({ length: 60 }, (_, o) => ({
      _id: 5000 + o, customerId: 1000 + (o % 12), createdAt: new Date(Date.UTC(2026, 0, 1) + o * 3600e3), status: 'open',
      lines: [0, 1, 2].map((k) => ({ productId: products[(o * 7 + k) % 30]._id, qty: 1 + (k % 3) })),
    })));
    await db.collection('orders').createIndex({ customerId: 1, createdAt: -1 });
    await sleep(300);
    const next = rng(7);
    const plan = PLAN.flatMap(([op, n]) => Array(n).fill(op));
    for (let i = plan.length - 1; i > 0; i--) { const j = next(i + 1); [plan[i], plan[j]] = [plan[j], plan[i]]; }
    const done = {};
    for (const op of plan) {
      const orderId = 5000 + next(60);
      if (op === 'show') {
        const order = await db.collection('orders').findOne({ _id: orderId });
        const customer = await db.collection('customers').findOne({ _id: order.customerId }, { projection: { name: 1 } });
        const items = await db.collection('products').find({ _id: { $in: order.lines.map((l) => l.productId) } }, { projection: { name: 1, price: 1 } }).toArray();
        check(customer && items.length, 'an order page');
      } else if (op === 'add_line') {
        await db.collection('orders').updateOne({ _id: orderId }, { $push: { lines: { productId: products[next(30)]._id, qty: 1 } } });
      } else if (op === 'history') {
        await db.collection('orders').find({ customerId: 1000 + next(12) }).sort({ createdAt: -1 }).limit(10).toArray();
      } else {
        await db.collection('customers').updateOne({ _id: 1000 + next(12) }, { $set: { address: { city: 'Paris', street: `${next(99)} rue Y` } } });
      }
      done[op] = (done[op] || 0) + 1;
      await sleep(THINK_MS);
    }
    console.log(`ran ${Object.entries(done).map(([k, v]) => `${k} ${v}`).join(', ')}`);
  } finally {
    await client.close();
  }
});
