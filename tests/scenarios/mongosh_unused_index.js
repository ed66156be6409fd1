// I7: a mongosh script. events has {type: 1, at: -1} and a leftover {legacyCode: 1}; 150 queries
// find({type}).sort({at: -1}), each for another type, all use the first. mongotap should report unused_index on DB.events
// (legacyCode_1) and nothing else.
// Run: mongosh URI --quiet --eval "var DBNAME = 'name'" mongosh_unused_index.js
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
if (n !== 300) throw new Error(`expected 300 events, read ${n}`);
print(`150 queries by type, ${n} events`);
