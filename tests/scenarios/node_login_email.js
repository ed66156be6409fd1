// R3: a login form looks users up by email ignoring case, as many apps do with the Node driver:
// findOne({email: {$regex: '^' + escaped + '$', $options: 'i'}}) (SecantusDB 0.7.0b3 drops a BSON regex's own flags,
// so the string form Mongoose users write too), 40 logins of 40 users, with a unique index on
// email that the case-insensitive pattern cannot seek. mongotap should report inefficient_regex on
// DB.users, field email, with the collation index as the fix.
'use strict';
const { check, runShop } = require('./common');

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

async function seedUsers(db) {
  const users = db.collection('users');
  await users.insertMany(Array.from({ length: 40 }, (_, i) => ({ email: `User${i}@Example.com`, name: `User ${i}` })));
  await users.createIndex({ email: 1 }, { unique: true });
}

runShop(async (db) => {
  let found = 0;
  for (let i = 0; i < 40; i++) {
    const typed = `user${i}@example.com`;
    const user = await db.collection('users').findOne(
      { email: { $regex: `^${escape(typed)}$`, $options: 'i' } }, { projection: { name: 1 } });
    if (user) found += 1;
  }
  check(found === 40, `${found} of 40 users found`);
  return '40 logins by email, ignoring case';
}, seedUsers);
