"""Books with the customers who bought them: the outlier pattern's own example.

200 books with up to 30 buyers each, and 3 best sellers with 2,000 to 3,000; each
book page is read by _id.

bad:   every buyer's id in the book's `buyers` array, best sellers included: an
       array small in almost every document and huge in a few, which every write
       and every read without a projection of those few carries.
fixed: the outlier pattern: a book keeps its first 50 buyers and `hasExtras: true`;
       the rest go to overflow documents in `book_buyers` (50 ids each), read only
       by the rare page that lists every buyer.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import check, start  # noqa: E402

db, version = start("books")
KEEP = 50


def buyers(i):
    return 2000 + 500 * (i - 200) if i >= 200 else i % 31


for first in range(0, 203, 50):
    books, extras = [], []
    for i in range(first, min(first + 50, 203)):
        ids = [f"c{j}" for j in range(buyers(i))]
        if version == "bad" or len(ids) <= KEEP:
            books.append({"_id": i, "title": f"Book {i}", "buyers": ids})
            continue
        books.append({"_id": i, "title": f"Book {i}", "buyers": ids[:KEEP], "hasExtras": True})
        extras += [{"book": i, "buyers": ids[at:at + KEEP]} for at in range(KEEP, len(ids), KEEP)]
    db.books.insert_many(books)
    if extras:
        db.book_buyers.insert_many(extras)
pages = sum(1 for i in range(0, 203, 5) if db.books.find_one({"_id": i}, {"title": 1}))
check(pages == 41, f"{pages} book pages")
print(f"{version}: 203 books, the largest document holds {max(len(b['buyers']) for b in db.books.find({}, {'buyers': 1}))} buyers")
