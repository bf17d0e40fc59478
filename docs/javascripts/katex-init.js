// Renders the math that pymdownx.arithmatex (generic mode) leaves as \( \) and \[ \]
// spans, with the KaTeX copy vendored under docs/assets/katex (nothing is downloaded).
// `document$` is mkdocs-material's page observable, so instant navigation re-renders too.
document$.subscribe(({ body }) => {
  renderMathInElement(body, {
    delimiters: [
      { left: "\\(", right: "\\)", display: false },
      { left: "\\[", right: "\\]", display: true },
    ],
    ignoredClasses: ["highlight", "codehilite"],
    throwOnError: false,
  });
});
