// N10: P5's orders page done right: the page's customers are loaded with one find({_id: {$in: ids}}).
// The page's sort is served by {createdAt: 1}, walked backwards.
// mongotap should report nothing (no n_plus_one, no redundant_query, no missing_index).
'use strict';
const { check, runShop } = require('./common');

runShop(async (db) => {
  await db.collection('orders').createIndex({ createdAt: 1 });
  for (let page = 0; page < 10; page++) {
    const recent = await db.collection('orders').find().sort({ createdAt: -1 }).skip(page * 4).limit(20).toArray();
    const ids = [...new Set(recent.map((o) => o.customerId))];
    const found = await db.collection('customers').find({ _id: { $in: ids } }).toArray();
    check(found.length === ids.length, 'a customer is missing');
  }
  return '10 pages, one $in batch each';
});
