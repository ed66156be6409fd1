// W4: Mongoose product reviews kept in the product document. 300 times: load the product
// (Product.findById), product.reviews.push(review), product.save(). Mongoose sends each save as
// update({_id}, {$push: {reviews: {$each: [review]}}, $inc: {__v: 1}}), no $slice: the array grows to 301.
// mongotap should report unbounded_array_growth on DB.products, field reviews.
'use strict';
const { nodeRequire, args, check, run } = require('./common');
const mongoose = nodeRequire('mongoose');

const Product = mongoose.model('Product', new mongoose.Schema({
  name: String,
  price: Number,
  reviews: [new mongoose.Schema({ author: String, stars: Number, text: String, at: Date })],
}));

run(async () => {
  const { uri, dbName } = args();
  await mongoose.connect(uri, { dbName, autoIndex: false });
  try {
    await mongoose.connection.dropDatabase();
    const [viral] = await Product.insertMany(Array.from({ length: 6 }, (_, p) => ({
      name: `Product ${p}`, price: 10 + p, reviews: [{ author: 'seed', stars: 5, text: 'First.', at: new Date(Date.UTC(2024, 3, 30)) }],
    })));
    for (let n = 0; n < 300; n++) {
      const product = await Product.findById(viral._id);
      product.reviews.push({ author: `user${n % 97}`, stars: 1 + (n % 5), text: 'Works as described. '.repeat(3), at: new Date(Date.UTC(2024, 4, 1) + n * 60e3) });
      await product.save();
    }
    const reloaded = await Product.findById(viral._id);
    check(reloaded.reviews.length === 301, `the product has ${reloaded.reviews.length} reviews, not 301`);
    console.log(`300 saves, ${reloaded.reviews.length} reviews (collection ${Product.collection.name})`);
  } finally {
    await mongoose.disconnect();
  }
});
