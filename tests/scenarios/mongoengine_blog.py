"""P3, P4, N3: a mongoengine blog, 10 front pages of 20 posts, each showing its author's name.
Run as `mongoengine_blog.py URI DBNAME MODE`; the MODE says how posts reference their author:

- reference (P3): lazy ReferenceField. Reading post.author.name dereferences each post's author with its
  own find_one({_id: ...}) on 'user'. mongotap should report n_plus_one on DB.post -> DB.user, link author -> _id.
- dbref (P4): ReferenceField(User, dbref=True): posts store author as {$ref: "user", $id: ...}, dereferenced
  one by one. mongotap should report n_plus_one on DB.post -> DB.user, link author.$id -> _id.
- select_related (N3): reference's pages with select_related(): the page's authors are loaded with one
  find({_id: {$in: [...]}}) on 'user' per page. mongotap should report no n_plus_one and no redundant_query;
  the relationship map says the page still needs a second round trip for author names read with every post
  and never changed: extended_reference_candidate on DB.post -> DB.user.
"""
import time

from mongoengine import Document, ReferenceField, StringField, connect

from common import args, check

uri, dbname, mode = args(modes=("reference", "dbref", "select_related"))


class User(Document):
    name = StringField(required=True)
    email = StringField()


class Post(Document):
    author = ReferenceField(User, dbref=mode == "dbref")
    title = StringField()
    body = StringField()


connect(db=dbname, host=uri).drop_database(dbname)
users = [User(name=f"User {i}", email=f"user{i}@example.com").save() for i in range(30)]
Post.objects.insert([Post(author=users[(i * 7) % 30], title=f"Post {i}", body="Lorem ipsum. " * 20) for i in range(60)],
                    load_bulk=False)

names = []
for page in range(10):
    time.sleep(0.06)  # a reader between two pages: longer than the operations' 50 ms gap
    posts = Post.objects.order_by("-id").skip(page * 4).limit(20)
    if mode == "select_related":
        posts = posts.select_related()  # one $in on 'user' per page
    names.extend(post.author.name for post in posts)  # otherwise: one query per post
check(len(names) == 200 and all(names), "missing authors")
print(f"{mode}: 10 pages, {len(names)} authors (collections {Post._get_collection_name()}, {User._get_collection_name()})")
