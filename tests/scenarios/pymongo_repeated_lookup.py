"""P10: a helper that reads the site settings every time it is called, called 30 times in a row
(5 such bursts): the same find_one({_id: "site"}) 150 times.

mongotap should report redundant_query on DB.settings, and no n_plus_one.
"""
import time

from common import args, check, fresh_db

uri, dbname = args()
client, db = fresh_db(uri, dbname)
db.settings.insert_one({"_id": "site", "title": "My blog", "theme": "dark", "postsPerPage": 20})


def site_title():
    return db.settings.find_one({"_id": "site"})["title"]


for burst in range(5):
    titles = [site_title() for _ in range(30)]
    check(titles == ["My blog"] * 30, "unexpected settings")
    time.sleep(0.2)
print("5 bursts of 30 identical settings reads")
