"""What every example shares: `app.py URI DBNAME bad|fixed`, a fresh database, and a check."""
import sys

import pymongo


def start(name):
    """Parses the command line and returns (database, version): the database is dropped first."""
    if len(sys.argv) != 4 or sys.argv[3] not in ("bad", "fixed"):
        sys.exit(f"usage: {sys.argv[0]} MONGODB_URI DBNAME bad|fixed")
    uri, dbname, version = sys.argv[1:]
    client = pymongo.MongoClient(uri, appname=f"{name}-{version}")
    client.drop_database(dbname)
    return client[dbname], version


def check(cond, what):
    if not cond:
        sys.exit(f"check failed: {what}")
