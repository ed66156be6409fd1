// I8 (unused_index's negative): a mongosh script. events has {type: 1, at: -1} and {legacyCode: 1};
// 150 queries find({type}).sort({at: -1}) use the first, and a nightly report reads by legacyCode with
// .hint({legacyCode: 1}) 10 times. Both indexes are used: mongotap should report nothing.
// Run: mongosh URI --quiet --eval "var DBNAME = 'name'" mongosh_hinted_index.js
if (typeof DBNAME === 'undefined') throw new Error('set DBNAME with --eval "var DBNAME = \'name\'"');
const app = db.getSiblingDB(DBNAME);
app.dropDatabase();
app.events.createIndex({ type: 1, at: -1 });
app.events.createIndex({ legacyCode: 1 });
app.events.insertMany(Array.from({ length: 300 }, (_, i) => ({ type: `t${i % 150}`, at: i, legacyCode: `L${i}` })));
let n = 0;
for (let i = 0; i < 150; i++) {
  n += app.events.find({ type: `t${i}` }).sort({ at: -1 }).limit(3).toArray().length;
}
let legacy = 0;
for (let i = 0; i < 10; i++) {
  legacy += app.events.find({ legacyCode: `L${i * 7}` }).hint({ legacyCode: 1 }).toArray().length;
}
if (n !== 300 || legacy !== 10) throw new Error(`expected 300 and 10 events, read ${n} and ${legacy}`);
print(`150 queries by type, 10 hinted by legacyCode`);
