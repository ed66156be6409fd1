// S4: one JavaScript number field, stored as the Node driver sees fit: whole prices go out as int32, the
// others as doubles, and a stock count past 2^31 as a double too. Every price is a number: mongotap must
// not call it a drift, and its schemas section should infer a validator with price a "number".
'use strict';
const { check, runShop } = require('./common');

async function seedProducts(db) {
  await db.collection('products').createIndex({ sku: 1 }, { unique: true });
  await db.collection('products').insertMany(Array.from({ length: 60 }, (_, i) => ({
    sku: `sku-${i}`,
    price: i % 2 === 0 ? 10 + i : 10 + i + 0.5,
    stock: i % 5 === 0 ? 3_000_000_000 + i : i,
    tags: i % 3 === 0 ? ['sale'] : [],
  })));
}

runShop(async (db) => {
  let found = 0;
  for (let i = 0; i < 60; i += 3) {
    if (await db.collection('products').findOne({ sku: `sku-${i}` })) found += 1;
  }
  check(found === 20, `${found} of 20 products found`);
  return '60 products priced, 20 read back';
}, seedProducts);
