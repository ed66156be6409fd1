// I6: the Node driver creates two indexes on orders, then serves 30 history pages
// find({customerId}).sort({createdAt: -1}) while new orders keep maintaining both. MODE:
// `prefix`: {customerId: 1} and later {customerId: 1, createdAt: -1}: the pages use the wider one.
//   mongotap should report redundant_index on DB.orders (customerId_1, a prefix of the other) and nothing else.
// `apart`, its negative: {customerId: 1, createdAt: -1} and {createdAt: -1}, the second for the shop's
//   "latest orders" page across customers (30 of them): neither is a prefix of the other, both are used.
//   mongotap should report nothing.
'use strict';
const { nodeRequire, args, check, run } = require('./common');
const { MongoClient } = nodeRequire('mongodb');

run(async () => {
  const { uri, dbName, mode } = args(['prefix', 'apart']);
  const client = await MongoClient.connect(uri);
  try {
    const db = client.db(dbName);
    await db.dropDatabase();
    const orders = db.collection('orders');
    await orders.createIndex(mode === 'prefix' ? { customerId: 1 } : { createdAt: -1 });
    await orders.createIndex({ customerId: 1, createdAt: -1 });
    await orders.insertMany(Array.from({ length: 300 }, (_, i) => ({ customerId: i % 20, createdAt: i, total: i })));
    for (let i = 0; i < 30; i++) {
      const page = await orders.find({ customerId: i % 20 }).sort({ createdAt: -1 }).limit(5).toArray();
      check(page.length === 5, `history page ${i} has ${page.length} orders`);
      await orders.insertOne({ customerId: i % 20, createdAt: 1000 + i, total: 1 });
      if (mode === 'apart') {
        const latest = await orders.find({}).sort({ createdAt: -1 }).limit(10).toArray();
        check(latest[0].createdAt === 1000 + i, 'the latest order is the one just placed');
      }
    }
    console.log('30 history pages and 30 new orders');
  } finally {
    await client.close();
  }
});
