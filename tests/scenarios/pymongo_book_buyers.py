"""Books with the ids of the customers who bought them, as the outlier pattern's own example. Run as
`pymongo_book_buyers.py URI DBNAME MODE`:

- outliers (O1): 200 books with 0 to 30 buyers each, and 3 best sellers with 2,000 to 3,000. The array is
  small in almost every document and huge in a few: mongotap should report outlier_candidate on DB.books,
  field buyers.
- even (O2): 200 books with 20 to 60 buyers each, no best seller. No finding.
Each book page is then read by _id.
"""
from common import args, check, fresh_db

uri, dbname, mode = args(modes=("outliers", "even"))
client, db = fresh_db(uri, dbname)


def buyers(i):
    if mode == "outliers":
        return 2000 + 500 * (i - 200) if i >= 200 else i % 31
    return 20 + i % 41


count = 203 if mode == "outliers" else 200
for start in range(0, count, 50):
    db.books.insert_many([{"_id": i, "title": f"Book {i}", "buyers": [f"c{j}" for j in range(buyers(i))]}
                          for i in range(start, min(start + 50, count))])
pages = sum(1 for i in range(0, count, 5) if db.books.find_one({"_id": i}, {"title": 1}))
check(pages == len(range(0, count, 5)), f"{pages} book pages")
print(f"{mode}: {count} books")
