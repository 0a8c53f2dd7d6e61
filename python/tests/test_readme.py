"""The README's Python example runs as written against a real server (only the address and
the admin token are this server's) as rank 0, while rank 1 joins its fence, and does what its
comments say."""

import re
import threading
import time

import onesided
from onesided import LockType

from conftest import REPOSITORY, RANK_TIMEOUT


def readme_example():
    text = (REPOSITORY / "README.md").read_text()
    section = text.split("## Use it from Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs(server):
    code = readme_example()
    assert 'url = "http://127.0.0.1:50051"' in code and '"the-admin-token"' in code
    code = code.replace("http://127.0.0.1:50051", server.url)
    code = code.replace("the-admin-token", server.token)
    printed = []
    failures = []
    names = {"print": lambda *words: printed.append(" ".join(map(str, words)))}

    def rank_0():
        try:
            exec(compile(code, "README.md", "exec"), names)
        except BaseException as failure:
            failures.append(failure)

    example = threading.Thread(target=rank_0, daemon=True)
    example.start()
    # rank 1 joins once rank 0 has opened the window (the example's fence is collective)
    deadline = time.monotonic() + RANK_TIMEOUT
    while "stock" not in names:
        assert not failures, failures
        assert time.monotonic() < deadline, "the example never opened its window"
        time.sleep(0.01)
    session = onesided.Session.attach(server.url, names["world"].tokens[1])
    stock = session.window("stock")
    stock.fence()
    example.join(RANK_TIMEOUT)
    assert not example.is_alive() and not failures, failures
    assert printed == ["element 0 of rank 1: 0"]
    # the fence brought rank 0's accumulate into rank 1's private copy, and published rank
    # 0's store
    assert stock.load(3)[0] == 5
    stock.lock(LockType.SHARED, 0)
    published = stock.get(0, 0, 1)
    stock.unlock(0)
    assert published.value()[0] == 42
