// W4 (Mongoose): embed. Run as `node mongoose_user_addresses.js URI DBNAME MODE`.
// Users keep their 2-3 saved addresses in another collection (Address.user -> User._id).
// - embed (W4): 50 profile pages (User.findById, then Address.find({user})) and 10 address changes (the
//   user's addresses, one updated, the user's updatedAt set), a think time apart. The addresses are read with
//   their user every time, owned by one user, bounded, and changed together with it: mongotap should give
//   users -> addresses (_id -> user) the verdict embed and report embed_candidate on DB.users.
// - apart (N-W4): the same data, but the pages read addresses on their own (an address book listing by city)
//   and users on their own: no link is followed, no embed.
'use strict';
const { nodeRequire, args, check, run } = require('./common');
const mongoose = nodeRequire('mongoose');

const THINK_MS = 60;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const User = mongoose.model('User', new mongoose.Schema({ name: String, email: String, updatedAt: Date }));
const Address = mongoose.model('Address', new mongoose.Schema({
  user: { type: mongoose.Schema.Types.ObjectId, ref: 'User' }, label: String, street: String, city: String,
}));

run(async () => {
  const { uri, dbName, mode } = args(['embed', 'apart']);
  await mongoose.connect(uri, { dbName, autoIndex: false });
  try {
    await mongoose.connection.dropDatabase();
    const users = await User.insertMany(Array.from({ length: 30 }, (_, u) => ({ name: `User ${u}`, email: `u${u}@example.com` })));
    await Address.insertMany(users.flatMap((u, i) => Array.from({ length: 2 + (i % 2) }, (_, k) => ({
      user: u._id, label: ['home', 'work', 'other'][k], street: `${k} rue ${i}`, city: `City ${(i + k) % 24}`,
    }))));
    await mongoose.connection.db.collection('addresses').createIndex({ user: 1 });
    await mongoose.connection.db.collection('addresses').createIndex({ city: 1 });
    await sleep(300);
    let pages = 0;
    for (let i = 0; i < 60; i++) {
      const u = users[(i * 7) % 30];
      if (mode === 'apart') {
        const who = await User.findById(u._id);
        await sleep(THINK_MS);
        const book = await Address.find({ city: `City ${(i * 5) % 24}` }).limit(10);
        check(who && book.length, 'a page');
      } else if (i % 6 === 5) {
        const mine = await Address.find({ user: u._id });
        await Address.updateOne({ _id: mine[0]._id }, { $set: { street: `${i} avenue Z` } });
        await User.updateOne({ _id: mine[0].user }, { $set: { updatedAt: new Date() } });
      } else {
        const profile = await User.findById(u._id);
        const addresses = await Address.find({ user: profile._id });
        check(addresses.length >= 2, 'the addresses');
      }
      pages++;
      await sleep(THINK_MS);
    }
    console.log(`${mode}: ${pages} requests (collections ${User.collection.name}, ${Address.collection.name})`);
  } finally {
    await mongoose.disconnect();
  }
});
