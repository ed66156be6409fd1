// P5: N+1 with the Node driver. The orders page loads the 20 most recent orders, then awaits
// customers.findOne({_id: customerId}) for each order in a loop.
// mongotap should report n_plus_one on DB.orders -> DB.customers, link customerId -> _id.
'use strict';
const { check, runShop } = require('./common');

runShop(async (db) => {
  let lookups = 0;
  for (let page = 0; page < 10; page++) {
    const recent = await db.collection('orders').find().sort({ createdAt: -1 }).skip(page * 4).limit(20).toArray();
    for (const order of recent) {
      const customer = await db.collection('customers').findOne({ _id: order.customerId });
      check(customer, `customer ${order.customerId} not found`);
      lookups++;
    }
  }
  return `10 pages, ${lookups} customer lookups`;
});
