// Mongoose, unmodified, through mongotap: a model, a create and a count.
// Usage: node mongoose.js MONGOTAP_URI
const mongoose = require('mongoose');

(async () => {
  await mongoose.connect(process.argv[2], { appName: 'mongoose-smoke' });
  const K = mongoose.model('K', new mongoose.Schema({ a: Number }));
  await K.create({ a: 1 });
  const n = await K.countDocuments({ a: 1 });
  await mongoose.disconnect();
  console.log((n >= 1 ? 'ok   ' : 'FAIL ') + 'mongoose: create and count');
  process.exit(n >= 1 ? 0 : 1);
})().catch((e) => { console.error(e); process.exit(1); });
