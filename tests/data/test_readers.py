"""Readers: lines of UTF-8 files, clear errors naming the file (and line)."""

import pytest

from seqjax.data.corpora.readers import read_parallel, read_texts


def test_read_texts_of_lines_strips_line_endings_and_keeps_blank_lines(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes("one\r\n\nthrée\n".encode())
    assert read_texts(path) == ["one", "", "thrée"]


def test_read_texts_of_lines_keeps_a_last_line_without_newline(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("one\ntwo")
    assert read_texts(path) == ["one", "two"]


def test_nonexistent_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="missing.txt"):
        read_texts(tmp_path / "missing.txt")


def test_empty_file_is_named(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="must not be empty.*empty.txt"):
        read_texts(path)


def test_undecodable_bytes_name_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nalso fine\nbad \xff byte\n")
    with pytest.raises(ValueError, match=r"bad.txt' at line 3"):
        read_texts(path)


def test_read_parallel_pairs_lines(tmp_path):
    (tmp_path / "train.en").write_text("a\nb\n")
    (tmp_path / "train.de").write_text("x\ny\n")
    assert read_parallel(str(tmp_path / "train"), "en", "de") == (["a", "b"], ["x", "y"])


def test_read_parallel_refuses_different_line_counts_naming_both(tmp_path):
    (tmp_path / "train.en").write_text("a\nb\nc\n")
    (tmp_path / "train.de").write_text("x\ny\n")
    with pytest.raises(ValueError, match=r"got 3 lines in .*train.en' and 2 lines in .*train.de'"):
        read_parallel(str(tmp_path / "train"), "en", "de")


@pytest.mark.parametrize(
    "content, lines",
    [(b"\n\n\n", ["", "", ""]), (b"a\n", ["a"]), (b"\xef\xbb\xbf\n", [""]), (b"\xef\xbb\xbfab\n", ["ab"])],
)
def test_a_file_of_a_few_bytes_ending_its_last_line_has_no_extra_blank_line(tmp_path, content, lines):
    """Files shorter than the first read (the byte-order mark's 3 bytes, or just past them)."""
    path = tmp_path / "short.txt"
    path.write_bytes(content)
    assert read_texts(path) == lines
