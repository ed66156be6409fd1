"""Subtypes of one model saved one after the other (mongoengine's allow_inheritance: a `_cls` field names
each document's class). Run as `mongoengine_people.py URI DBNAME`.

A school's people: 40 employees (a `salary`) saved first, then 40 students (a `school`), then the app lists
everyone and each kind. Two field sets, the second written only after the first and both read since: what a
half-done rename looks like, but `_cls` says they are two classes. No schema_drift.
"""
from mongoengine import Document, IntField, StringField, connect

from common import args, check

uri, dbname = args()
db = connect(db=dbname, host=uri)
db.drop_database(dbname)


class Person(Document):
    name = StringField(required=True)
    meta = {"allow_inheritance": True}


class Employee(Person):
    salary = IntField()


class Student(Person):
    school = StringField()


for i in range(40):
    Employee(name=f"employee {i}", salary=1000 + i).save()
for i in range(40):
    Student(name=f"student {i}", school=f"school {i % 4}").save()
seen = 0
for _ in range(5):
    seen += len(list(Person.objects))
    seen += len(list(Employee.objects.limit(10))) + len(list(Student.objects.limit(10)))
check(seen == 5 * 100, f"{seen} people listed")
print(f"people: {Person.objects.count()}")
