"""`logstore mirror`'s usage errors: one line, exit status 2, before any connection."""

from __future__ import annotations

from logstore.cli.app import main


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["mirror", "--source", "127.0.0.1:1"]) == 2
    assert "give --config FILE, or --source and --target" in capsys.readouterr().err
    assert main(["mirror", "status", "--config", str(tmp_path / "missing")]) == 2
    assert "cannot read" in capsys.readouterr().err
    cfg = tmp_path / "mm2.properties"
    cfg.write_text("clusters = a, b\na->b.enabled = true\nb.bootstrap.servers = x\n")
    assert main(["mirror", "run", "--config", str(cfg)]) == 2
    assert "configuration: a.bootstrap.servers is not set" in capsys.readouterr().err
    assert main(["mirror", "--source", "h:1", "--target", "h:2", "--set", "nonsense"]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err
    assert main(["mirror", "--source", "h:1", "--target", "h:2", "--set", "offset.lag.max=x"]) == 2
    assert "offset.lag.max" in capsys.readouterr().err
