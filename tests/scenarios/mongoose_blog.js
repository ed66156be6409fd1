// P6, N2: Mongoose blog, 10 front pages of 20 posts with their authors populated.
// Run as `node mongoose_blog.js URI DBNAME MODE`; the MODE says how the page populates `author`:
// - per_document (P6): populate with perDocumentLimit. Instead of one $in batch per page, Mongoose sends one
//   find({_id: {$in: [authorId]}}, limit 1) on users per post, all 20 at once (Promise.all), so they spread
//   over many pooled connections. mongotap should report n_plus_one on DB.posts -> DB.users, link author -> _id.
// - populate (N2): the default populate('author'): the page's authors are loaded with one
//   find({_id: {$in: [...]}}) on users per page. mongotap should report no n_plus_one and no redundant_query;
//   the relationship map says the page still needs a second round trip for the authors, read with every post
//   and never changed: extended_reference_candidate on DB.posts -> DB.users (as mongoengine's select_related).
'use strict';
const { nodeRequire, args, check, run } = require('./common');
const mongoose = nodeRequire('mongoose');

const User = mongoose.model('User', new mongoose.Schema({ name: String, email: String }));
const Post = mongoose.model('Post', new mongoose.Schema({
  author: { type: mongoose.Schema.Types.ObjectId, ref: 'User' }, title: String, body: String,
}));

run(async () => {
  const { uri, dbName, mode } = args(['per_document', 'populate']);
  const populate = mode === 'per_document' ? { path: 'author', perDocumentLimit: 1 } : 'author';
  await mongoose.connect(uri, { dbName, autoIndex: false });
  try {
    await mongoose.connection.dropDatabase();
    const users = await User.insertMany(Array.from({ length: 30 }, (_, i) => ({ name: `User ${i}`, email: `user${i}@example.com` })));
    await Post.insertMany(Array.from({ length: 60 }, (_, i) => ({ author: users[(i * 7) % 30]._id, title: `Post ${i}`, body: 'Lorem ipsum. '.repeat(20) })));
    for (let page = 0; page < 10; page++) {
      const posts = await Post.find().sort({ _id: -1 }).skip(page * 4).limit(20).populate(populate);
      check(posts.length === 20 && posts.every((p) => p.author && p.author.name), 'populate failed');
      await new Promise((r) => setTimeout(r, 60)); // a reader between two pages: longer than the 50 ms gap
    }
    console.log(`${mode}: 10 pages populated (collections ${Post.collection.name}, ${User.collection.name})`);
  } finally {
    await mongoose.disconnect();
  }
});
