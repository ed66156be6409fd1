// W5: comments copy their author's display name (authorName, with authorId). 6 users rename
// themselves; each rename is users.updateOne({_id}, {$set: {name}}) then
// comments.updateMany({authorId}, {$set: {authorName: name}}), which rewrites the user's 150 comments.
// mongotap should report fan_out_update on DB.comments, field authorName.
'use strict';
const { check, runShop } = require('./common');

const USERS = 10;
const COMMENTS_PER_USER = 150;

async function seed(db) {
  await db.collection('users').insertMany(Array.from({ length: USERS }, (_, u) => ({ _id: u + 1, name: `User ${u + 1}` })));
  await db.collection('comments').insertMany(Array.from({ length: USERS * COMMENTS_PER_USER }, (_, c) => ({
    postId: 1 + (c % 200), authorId: (c % USERS) + 1, authorName: `User ${(c % USERS) + 1}`, text: `Comment ${c}`,
  })));
}

runShop(async (db) => {
  let touched = 0;
  for (let u = 1; u <= 6; u++) {
    const name = `Renamed ${u}`;
    await db.collection('users').updateOne({ _id: u }, { $set: { name } });
    const result = await db.collection('comments').updateMany({ authorId: u }, { $set: { authorName: name } });
    check(result.matchedCount === COMMENTS_PER_USER && result.modifiedCount === COMMENTS_PER_USER,
      `rename ${u}: ${result.matchedCount} matched, ${result.modifiedCount} modified`);
    touched += result.modifiedCount;
  }
  return `6 renames, ${touched} comments rewritten`;
}, seed);
