"""LaTeX sources: the text as typeset, sections from the sectioning commands."""

from __future__ import annotations

from pathlib import Path

from tether.ingest.formats import load_path, sniff

PAPER = r"""\documentclass[11pt]{article}
\usepackage{amsmath} % the preamble prints nothing
\newcommand{\lamp}[1]{\textbf{#1}}
\title{Keeping the \emph{Lamp} Lit}
\author{Ana Ribeiro}
\begin{document}
\maketitle
\begin{abstract}
We show how a keeper trims the wick at dusk --- every day.
\end{abstract}
\section{Introduction}\label{sec:intro}
The lamp burns 2~litres of oil per night\footnote{Measured in 1998.} (see
Section~\ref{sec:oil} and \cite{ribeiro2020}). Costs fell by 10\% since
\href{https://example.org}{the survey}; see \url{https://example.org/oil}.

\subsection*{Oil}
\begin{itemize}
  \item Trim the \textbf{wick}.
  \item[Dusk] Light the lamp.
\end{itemize}

\begin{tabular}{ll}
\hline
Wind & Action \\
gale & stay in \\
\end{tabular}

\begin{verbatim}
light --all --at=dusk % not a comment in code
\end{verbatim}
% a comment that says nothing
\input{chapters/secret}
\end{document}
"""


def test_a_paper_reads_as_typeset(tmp_path: Path) -> None:
    path = tmp_path / "paper.tex"
    path.write_text(PAPER)
    doc = load_path(path)
    assert doc.title == "Keeping the Lamp Lit" and doc.mime == "application/x-latex"
    assert doc.text.split("\n\n") == [
        "We show how a keeper trims the wick at dusk \u2014 every day.",
        "Introduction",
        "The lamp burns 2 litres of oil per night (Measured in 1998.) (see\nSection and"
        " [ribeiro2020]). Costs fell by 10% since\nthe survey; see https://example.org/oil.",
        "Oil",
        "- Trim the wick.\n- Dusk: Light the lamp.",
        "Wind | Action\ngale | stay in",
        "```\nlight --all --at=dusk % not a comment in code\n```",
    ]
    assert [s.title for s in doc.sections][1:] == ["Introduction", "Introduction > Oil"]
    for source in ("\\", "usepackage", "Ribeiro", "secret", "says nothing"):
        assert source not in doc.text


def test_latex_is_known_by_its_content_and_a_hostile_file_costs_little(tmp_path: Path) -> None:
    found = sniff(b"% notes\n\\documentclass{article}\n\\begin{document}\nHi\n\\end{document}\n")
    assert found is not None and found.name == "LaTeX"
    deep = tmp_path / "deep.tex"
    deep.write_text("\\begin{document}\n" + "\\emph{" * 50_000 + "core" + "}" * 49_000 + "\n")
    text = load_path(deep).text
    assert "core" in text and "\\" not in text
