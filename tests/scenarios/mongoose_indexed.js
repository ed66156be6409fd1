// I4: Mongoose declares its indexes in the schema (`unique: true` on email, a compound
// {author: 1, createdAt: -1} for the author page); Model.init() builds them (createIndexes through the proxy).
// 30 author pages sorted by createdAt descending and 30 logins by email, each served by an index.
// mongotap should report nothing (no missing_index, no redundant_index, no unused_index).
'use strict';
const { nodeRequire, args, check, run } = require('./common');
const mongoose = nodeRequire('mongoose');

const userSchema = new mongoose.Schema({ name: String, email: { type: String, unique: true } });
const postSchema = new mongoose.Schema({ author: mongoose.Schema.Types.ObjectId, title: String, createdAt: Date });
postSchema.index({ author: 1, createdAt: -1 });
const User = mongoose.model('User', userSchema);
const Post = mongoose.model('Post', postSchema);

run(async () => {
  const { uri, dbName } = args();
  await mongoose.connect(uri, { dbName });
  try {
    await mongoose.connection.dropDatabase();
    await User.init();
    await Post.init();
    const users = await User.insertMany(Array.from({ length: 30 }, (_, i) => ({ name: `User ${i}`, email: `user${i}@example.com` })));
    await Post.insertMany(Array.from({ length: 300 }, (_, i) => ({
      author: users[i % 30]._id, title: `Post ${i}`, createdAt: new Date(Date.UTC(2026, 0, 1) + i * 3600e3),
    })));
    for (let i = 0; i < 30; i++) {
      const posts = await Post.find({ author: users[i]._id }).sort({ createdAt: -1 }).limit(5);
      check(posts.length === 5, `author page ${i} has ${posts.length} posts`);
      const u = await User.findOne({ email: `user${i}@example.com` });
      check(u && u.name === `User ${i}`, `no user ${i}`);
    }
    console.log('30 author pages and 30 logins, all indexed');
  } finally {
    await mongoose.disconnect();
  }
});
