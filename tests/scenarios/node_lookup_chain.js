// P12: a lookup chain written in the pipeline form. An order page, for 60 different orders: the order
// joins its customer with a $lookup that has `let` + `pipeline`, and that inner pipeline joins the
// customer's address with a nested $lookup.
// mongotap should report lookup_chain on DB.orders, lookups [DB.customers, DB.addresses] (outer, then nested).
'use strict';
const { check, runShop, seedShop } = require('./common');

async function seed(db) {
  await seedShop(db);
  await db.collection('addresses').insertMany(
    Array.from({ length: 30 }, (_, a) => ({ _id: a + 1, street: `${a + 1} Main St`, city: `City ${a % 7}` })));
  await db.collection('customers').updateMany({}, [{ $set: { addressId: '$_id' } }]);
}

const orderPage = (orderId) => [
  { $match: { _id: orderId } },
  {
    $lookup: {
      from: 'customers',
      let: { cid: '$customerId' },
      pipeline: [
        { $match: { $expr: { $eq: ['$_id', '$$cid'] } } },
        { $lookup: { from: 'addresses', localField: 'addressId', foreignField: '_id', as: 'address' } },
        { $project: { name: 1, 'address.city': 1 } },
      ],
      as: 'customer',
    },
  },
  { $project: { total: 1, createdAt: 1, customer: 1 } },
];

runShop(async (db) => {
  for (let i = 0; i < 60; i++) {
    const orderId = ((i * 37) % 60) + 1; // each of the 60 orders once, in no particular order
    const rows = await db.collection('orders').aggregate(orderPage(orderId)).toArray();
    check(rows.length === 1 && rows[0].customer.length === 1 && rows[0].customer[0].address.length === 1,
      `the joins did not match: ${JSON.stringify(rows[0])}`);
  }
  return '60 order pages, $lookup with a nested $lookup';
}, seed);
