"""P2: the N+1 of P1, but the authors are fetched concurrently by 8 threads sharing one pooled client,
so the child queries arrive on several connections.

mongotap should report n_plus_one on DB.posts -> DB.users, link authorId -> _id.
"""
import threading
from concurrent.futures import ThreadPoolExecutor

from pymongo import monitoring

from common import args, check, fresh_db, seed_blog


class CheckoutCounter(monitoring.ConnectionPoolListener):
    """Remembers which pooled connections the application checked out."""

    def __init__(self):
        self.ids, self.lock = set(), threading.Lock()

    def connection_checked_out(self, event):
        with self.lock:
            self.ids.add(event.connection_id)


for _name in dir(monitoring.ConnectionPoolListener):  # every other pool event: ignore
    if _name.startswith(("pool_", "connection_")) and _name != "connection_checked_out":
        setattr(CheckoutCounter, _name, lambda self, event: None)

uri, dbname = args()
counter = CheckoutCounter()
client, db = fresh_db(uri, dbname, maxPoolSize=8, event_listeners=[counter])
seed_blog(db)
counter.ids.clear()

with ThreadPoolExecutor(8) as pool:
    for page in range(10):
        posts = list(db.posts.find().sort("_id", -1).skip(page * 4).limit(20))
        authors = list(pool.map(lambda post: db.users.find_one({"_id": post["authorId"]}, {"name": 1}), posts))
        check(all(authors), "an author was not found")
check(len(counter.ids) >= 2, f"children used only {len(counter.ids)} connection(s)")
print(f"10 pages, 200 author lookups over {len(counter.ids)} pooled connections")
