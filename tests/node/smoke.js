// The official Node driver, unmodified, through mongotap against SecantusDB.
// Usage: node smoke.js MONGOTAP_URI
const { MongoClient } = require('mongodb');

function check(name, cond) {
  console.log((cond ? 'ok   ' : 'FAIL ') + name);
  if (!cond) process.exit(1);
}

(async () => {
  const client = new MongoClient(process.argv[2], { appName: 'node-smoke' });
  await client.connect();
  const db = client.db('nodesmoke');
  await db.dropDatabase();
  const orders = db.collection('orders');
  await orders.insertMany(Array.from({ length: 120 }, (_, i) => ({ _id: i, customer: i % 6, total: i })));
  const all = await orders.find({ total: { $gte: 0 } }, { batchSize: 25 }).toArray();
  check('node: find with getMore chain', all.length === 120);
  const upd = await orders.updateMany({ customer: 2 }, { $set: { flagged: true } });
  check('node: updateMany', upd.modifiedCount === 20);
  const bulk = await orders.bulkWrite([
    { insertOne: { document: { _id: 500, customer: 1 } } },
    { deleteOne: { filter: { _id: 0 } } },
  ]);
  check('node: bulkWrite', bulk.insertedCount === 1 && bulk.deletedCount === 1);
  const agg = await orders.aggregate([{ $group: { _id: '$customer', n: { $sum: 1 } } }]).toArray();
  check('node: aggregate', agg.length === 6);
  await client.close();
})().catch((e) => { console.error(e); process.exit(1); });
