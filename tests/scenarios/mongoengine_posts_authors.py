"""W3 (mongoengine): an extended reference. Run as `mongoengine_posts_authors.py URI DBNAME MODE`.

A blog's post page loads the post (Post.objects.get) and shows its author's name: mongoengine dereferences
the ReferenceField with one find of the author by _id. 20 authors share 200 posts.

- copy (W3): 60 post pages and 2 author renames, a user's think time apart. mongotap should list the two
  operations (60 and 2) and give post -> user (author -> _id) the verdict extended_reference with the author's
  fields the page reads, and report extended_reference_candidate on DB.post.
- renamed_often (N-W3): the same pages, but authors rename themselves as often as their posts are read
  (60 renames). Copying the name would rewrite it in every post each time: the verdict must be reference,
  and no extended_reference_candidate.
"""
import time

from mongoengine import Document, ReferenceField, StringField, connect

from common import args, check

THINK = 0.06
uri, dbname, mode = args(modes=("copy", "renamed_often"))


class User(Document):
    name = StringField(required=True)
    email = StringField()


class Post(Document):
    author = ReferenceField(User)
    title = StringField()
    body = StringField()


connect(db=dbname, host=uri).drop_database(dbname)
users = [User(name=f"Author {i}", email=f"a{i}@example.com").save() for i in range(20)]
Post.objects.insert([Post(author=users[i % 20], title=f"Post {i}", body="Text. " * 30) for i in range(200)],
                    load_bulk=False)
ids = [p.id for p in Post.objects.only("id")]
time.sleep(0.3)
renames = {"copy": {15, 45}, "renamed_often": set(range(60))}[mode]
names = []
for view in range(60):
    post = Post.objects.get(id=ids[(view * 37) % 200])
    names.append(post.author.name)
    time.sleep(THINK)
    if view in renames:
        User.objects(id=users[(view * 3) % 20].id).update_one(set__name=f"Author {view} renamed")
        time.sleep(THINK)
check(len(names) == 60 and all(names), "missing authors")
print(f"{mode}: 60 post pages, {len(renames)} renames (collections {Post._get_collection_name()}, {User._get_collection_name()})")
