"""What every example shares: `app.py URI DBNAME bad|fixed`, a fresh database, a check, a user's pause."""
import sys
import time

import pymongo


def start(name, **client_options):
    """Parses the command line and returns (database, version): the database is dropped first."""
    if len(sys.argv) != 4 or sys.argv[3] not in ("bad", "fixed"):
        sys.exit(f"usage: {sys.argv[0]} MONGODB_URI DBNAME bad|fixed")
    uri, dbname, version = sys.argv[1:]
    client = pymongo.MongoClient(uri, appname=f"{name}-{version}", **client_options)
    client.drop_database(dbname)
    return client[dbname], version


def check(cond, what):
    if not cond:
        sys.exit(f"check failed: {what}")


def think():
    """A user between two page views: longer than the 50 ms that separates one
    operation from the next, so each page view is counted as an operation of its own."""
    time.sleep(0.06)
