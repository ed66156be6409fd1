// N-W5 (mongosh): reviews are read on their own page, and keep coming. Run:
//   mongosh URI --quiet --eval "var DBNAME = 'name'" mongosh_reviews_pages.js
// A product page shows the product; a reviews page shows the product's title then 20 of its reviews, newest
// first; new reviews arrive all along (300 for the busiest product). Reviews are read apart from the product
// most of the time and grow without bound: the verdict for products -> reviews (_id -> productId) must be
// reference (or keep), never embed, and no embed_candidate.
if (typeof DBNAME === 'undefined') throw new Error('set DBNAME with --eval "var DBNAME = \'name\'"');
const app = db.getSiblingDB(DBNAME);
app.dropDatabase();
const ids = app.products.insertMany(Array.from({ length: 10 }, (_, p) => ({ name: `Product ${p}`, price: 10 + p }))).insertedIds;
app.reviews.createIndex({ productId: 1, at: -1 });
const pause = () => sleep(60);
let n = 0;
for (let i = 0; i < 60; i++) {
  const id = ids[i % 3 === 0 ? 0 : i % 10];
  for (let k = 0; k < 5; k++) {
    app.reviews.insertOne({ productId: id, stars: 1 + ((i + k) % 5), text: 'Fine. '.repeat(8), at: new Date(Date.UTC(2026, 0, 1) + (n++) * 60e3) });
  }
  pause();
  if (i % 4 === 0) {
    const p = app.products.findOne({ _id: id }, { name: 1 });
    const page = app.reviews.find({ productId: p._id }).sort({ at: -1 }).limit(20).toArray();
    if (!page.length) throw new Error('no reviews');
  } else {
    app.products.findOne({ _id: id });
  }
  pause();
}
print(`60 rounds, ${n} reviews`);
