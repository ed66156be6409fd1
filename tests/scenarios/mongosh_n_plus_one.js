// P8: N+1 typed into the shell. A mongosh script lists the 20 latest posts and looks up each author
// with findOne inside forEach, 10 times.
// Run: mongosh URI --quiet --eval "var DBNAME = 'name'" mongosh_n_plus_one.js
// mongotap should report n_plus_one on DB.posts -> DB.users, link authorId -> _id.
if (typeof DBNAME === 'undefined') throw new Error('set DBNAME with --eval "var DBNAME = \'name\'"');
const app = db.getSiblingDB(DBNAME);
app.dropDatabase();
const userIds = app.users.insertMany(
  Array.from({ length: 30 }, (_, i) => ({ name: `User ${i}`, email: `user${i}@example.com` }))).insertedIds;
app.posts.insertMany(
  Array.from({ length: 60 }, (_, i) => ({ authorId: userIds[(i * 7) % 30], title: `Post ${i}`, body: 'Lorem ipsum. '.repeat(20) })));

let lookups = 0;
for (let page = 0; page < 10; page++) {
  app.posts.find().sort({ _id: -1 }).skip(page * 4).limit(20).forEach((p) => {
    const author = app.users.findOne({ _id: p.authorId });
    if (!author) throw new Error(`author ${p.authorId} not found`);
    lookups++;
  });
}
if (lookups !== 200) throw new Error(`expected 200 author lookups, did ${lookups}`);
print(`10 pages, ${lookups} author lookups`);
