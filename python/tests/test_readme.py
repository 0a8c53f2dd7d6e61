"""The README's Python example runs as written against a real server (only the address and
the admin token file are this server's), both ranks in it, and prints what its comments say."""

import re
import threading

from conftest import REPOSITORY, RANK_TIMEOUT


def readme_example():
    text = (REPOSITORY / "README.md").read_text()
    section = text.split("## Use it from Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs(server, tmp_path):
    code = readme_example()
    assert 'url = "http://127.0.0.1:50051"' in code
    assert 'read_token("onesided-data/admin-token")' in code
    token_file = tmp_path / "admin-token"
    token_file.write_text(server.token + "\n")
    code = code.replace("http://127.0.0.1:50051", server.url)
    code = code.replace("onesided-data/admin-token", str(token_file))
    printed = []
    failures = []
    names = {"print": lambda *words: printed.append(" ".join(map(str, words)))}

    def run():
        try:
            exec(compile(code, "README.md", "exec"), names)
        except BaseException as failure:
            failures.append(failure)

    example = threading.Thread(target=run, daemon=True)
    example.start()
    example.join(RANK_TIMEOUT)
    assert not example.is_alive(), "the example did not finish"
    assert not failures, failures
    # rank 0's get saw rank 1's element 0 before anything was put there; rank 1's fence
    # brought rank 0's accumulate into its private copy, and rank 0's fence published its store
    assert printed == [
        "element 0 of rank 1: 0",
        "element 3 of rank 1: 5",
        "element 0 of rank 0: 42",
    ]
