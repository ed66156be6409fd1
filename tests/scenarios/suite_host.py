"""A pytest plugin for mongoengine's own tests: they connect to the default host (localhost:27017); this points
the default at MONGOTAP_SUITE_HOST (mongotap, or the server itself) before any test connects."""
import os

import mongoengine.connection

mongoengine.connection.DEFAULT_HOST = os.environ["MONGOTAP_SUITE_HOST"]
