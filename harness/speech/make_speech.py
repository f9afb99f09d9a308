"""Regenerate the speech fixtures: `python -m harness.speech.make_speech` (needs
`apt-get install espeak-ng sox`; CI does not: the WAV files are committed).

Each utterance is synthesised by espeak-ng (English: en-us at 165 words a minute; Chinese: cmn,
which reads Hanzi, faster, as its default pace is slow), resampled by sox to 16 kHz mono 16-bit (what LiveKit's Silero VAD takes), and
trimmed of leading and trailing silence, so that a file's last sample is the end of
the user's speech. `manifest.json` lists each file with its words and duration.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import wave
from pathlib import Path

HERE = Path(__file__).parent

# What the user says: memory questions from the public eval files (LoCoMo, MemDaily),
# statements and chit-chat in English and Chinese, as bench.latency.run's turns mix them;
# then the few the tests speak.
UTTERANCES: list[tuple[str, str]] = [
    ("u00", "舅妈的电话号码是多少来着？"),
    ("u01", "How did Nate celebrate winning the international tournament?"),
    ("u02", "我最近在学做饭，昨天做了红烧肉"),
    ("u03", "My favourite food is spicy ramen"),
    ("u04", "有几个活动的地点在广东广州？"),
    ("u05", "对于我路过的医院，以下哪个是最可能的描述？"),
    ("u06", "我妹妹下个月要结婚了"),
    ("u07", "What do you know about what events for veterans John has participated in?"),
    ("u08", "What subject have Caroline and Melanie both painted?"),
    ("u09", "I went hiking with my sister last weekend and it was great"),
    ("u10", "好的，谢谢"),
    ("u11", "对于我使用的运动鞋，以下哪个是最可能的描述？"),
    ("u12", "That sounds good to me"),
    ("u13", "那我的上司是哪个学校毕业的呢？"),
    ("u14", "航空服务创新峰会的持续时间是什么？"),
    ("u15", "对于我使用的手机，以下哪个是最可能的描述？"),
    ("u16", "What outdoor activities does John enjoy?"),
    ("u17", "ok thanks"),
    ("u18", "我参观的这个景区是什么呢？"),
    ("u19", "Has Tim been to North Carolina or Tennessee?"),
    ("u20", "Do you remember what Caroline said about her painting?"),
    ("u21", "I'm thinking about learning to play the piano"),
    ("u22", "What does Melanie do with her kids on weekends?"),
    ("u23", "Can you remind me where Jon opened his dance studio?"),
    # spoken by the tests
    ("t00", "My sister is called Anna and she lives in Lisbon"),
    ("t01", "What is my sister called?"),
]

RATE = 16_000


def _is_chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def synthesise(text: str, out: Path) -> float:
    """One utterance as a trimmed 16 kHz mono WAV; returns its duration in seconds."""
    voice, speed = ("cmn", "230") if _is_chinese(text) else ("en-us", "165")
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.wav"
        subprocess.run(["espeak-ng", "-v", voice, "-s", speed, "-w", str(raw), text], check=True)
        subprocess.run(
            ["sox", str(raw), "-r", str(RATE), "-c", "1", "-b", "16", str(out),
             "silence", "1", "0.02", "0.5%", "reverse", "silence", "1", "0.02", "0.5%", "reverse"],
            check=True,
        )  # fmt: skip
    with wave.open(str(out)) as w:
        return w.getnframes() / w.getframerate()


def main() -> None:
    manifest = []
    for key, text in UTTERANCES:
        path = HERE / f"{key}.wav"
        seconds = synthesise(text, path)
        manifest.append({"file": path.name, "text": text, "seconds": round(seconds, 3)})
        print(f"{path.name}: {seconds:.2f} s  {text}")
    (HERE / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
