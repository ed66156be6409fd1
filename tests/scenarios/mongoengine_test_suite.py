"""N-T1..N-T6: traffic as an ODM's own test suite makes it: cases that drop and re-create their collections,
reuse the same ids, count their queries with the profiler, and end by dropping everything. Every mode is a
negative: what these cases do is right, and mongotap must report nothing.
Run as `mongoengine_test_suite.py URI DBNAME MODE`:

- preset_ids: documents whose id is set before save() (a SequenceField): mongoengine saves each with a
  findAndModify replacement that matches nothing, then an insert. Twelve cases, each on a re-created
  collection with the same ids 1..8. No full_document_rewrite (nothing was there to rewrite).
- recreate: each case inserts document 1 with a list and pushes three items to it, then the collection is
  dropped. 36 pushes "to document 1" over the run, never more than 3 to one document. No
  unbounded_array_growth, and no redundant_query across drops.
- profiler: query_counter() (the profiler) counts each case's queries; its reads of system.profile are the
  server's collection, read again on purpose. No redundant_query, no missing_index on system.profile.
- gridfs: files stored and read back with a FileField; GridFS reads chunks by {files_id, n}, which its
  files_id_1_n_1 index serves; the suite drops everything at the end. No missing_index, and no over_fetch
  (a chunk is read for its data).
- inheritance: Animal with subclasses (allow_inheritance: a _cls field and its _cls_1 index); queries by
  class; dropped at the end. No missing_index. (Dropping between cases would be another story: mongoengine
  creates a class's indexes once per process, so later cases would really run without _cls_1.)
- generic_reference: a zoo holds its animals in a ListField(GenericReferenceField()); mongoengine loads them
  with one $in per class, after the animals were listed. No n_plus_one (the zoo is one document; the list of
  animals returned the same documents by their own _id, not references).
"""
import datetime

from mongoengine import (Document, FileField, GenericReferenceField, IntField, ListField, SequenceField,
                         StringField, connect)
from mongoengine.context_managers import query_counter

from common import args, check

uri, dbname, mode = args(modes=("preset_ids", "recreate", "profiler", "gridfs", "inheritance", "generic_reference"))
db = connect(db=dbname, host=uri)
db.drop_database(dbname)

if mode == "preset_ids":
    class Ticket(Document):
        number = SequenceField(primary_key=True)
        title = StringField()
        state = StringField()

    for case in range(12):
        Ticket.drop_collection()
        db[dbname]["mongoengine.counters"].drop()
        for i in range(8):
            Ticket(title=f"ticket {i}", state="open").save()  # the same ticket in every case
        for t in Ticket.objects:
            t.state = "closed"
            t.save()  # a $set of the changed field
        check(all(t.state == "closed" for t in Ticket.objects), f"case {case}: tickets not closed")
    summary = "12 cases of 8 tickets saved with preset ids"

elif mode == "recreate":
    class Cart(Document):
        id = IntField(primary_key=True)
        items = ListField(StringField())

    for case in range(12):
        Cart(id=1, items=[]).save()
        for k in range(3):
            Cart.objects(id=1).update_one(push__items=f"case {case} item {k}")
        check(len(Cart.objects.get(id=1).items) == 3, f"case {case}: wrong cart")
        Cart.drop_collection()
    summary = "12 cases of one cart, 3 pushes each, dropped after each"

elif mode == "profiler":
    class Note(Document):
        text = StringField()
        rank = IntField()

    Note.objects.insert([Note(text=f"note {i}", rank=i) for i in range(30)], load_bulk=False)
    ids = [n.id for n in Note.objects.only("id")]
    counts = []
    for case in range(15):
        with query_counter() as q:
            for k in range(3):
                Note.objects.get(id=ids[(case * 3 + k) % len(ids)])
            counts.append(int(q))
    summary = f"15 cases counted with the profiler ({counts[0]} queries each seen by it)"

elif mode == "gridfs":
    class Attachment(Document):
        name = StringField()
        data = FileField()

    for case in range(6):
        for i in range(4):
            a = Attachment(name=f"case {case} file {i}")
            a.data.put((f"case {case} file {i} " * 4000).encode(), filename=f"f{i}.txt")
            a.save()
            # Each case reads back the file it stored.
            check(len(Attachment.objects.get(id=a.id).data.read()) > 50_000, "file not read back")
    # The suite ends: everything is dropped, and with it the indexes that served the reads.
    Attachment.drop_collection()
    db[dbname]["fs.files"].drop()
    db[dbname]["fs.chunks"].drop()
    summary = "6 cases of 4 files stored and read back"

elif mode == "inheritance":
    class Animal(Document):
        name = StringField()
        meta = {"allow_inheritance": True}

    class Dog(Animal):
        pass

    class Cat(Animal):
        pass

    for case in range(6):
        for i in range(10):
            (Dog if i % 2 else Cat)(name=f"animal {case}-{i}").save()
        for _ in range(3):
            check(Dog.objects.count() == 5 * (case + 1) and len(list(Cat.objects)) == 5 * (case + 1), "wrong animals")
    # The suite ends: the collection goes, and _cls_1 with it.
    Animal.drop_collection()
    summary = "6 cases of dogs and cats queried by class"

else:  # generic_reference
    class Creature(Document):
        born = IntField()
        meta = {"allow_inheritance": True}

    class Fish(Creature):
        pass

    class Bird(Creature):
        pass

    class Snake(Creature):
        pass

    class Lion(Creature):
        pass

    class Zoo(Document):
        animals = ListField(GenericReferenceField())

    kinds = (Fish, Bird, Snake, Lion)
    for case in range(6):
        for k in kinds:
            k(born=case).save()
        zoo = Zoo(animals=list(Creature.objects)).save()
        zoo.reload()
        names = [type(a).__name__ for a in Zoo.objects.first().animals]
        check(names == ["Fish", "Bird", "Snake", "Lion"], f"wrong animals {names}")
        Zoo.drop_collection()
        Creature.drop_collection()
    summary = "6 zoos of 4 generic references"

db.drop_database(dbname)
print(f"{mode}: {summary} at {datetime.datetime.now(datetime.timezone.utc):%H:%M:%S}")
