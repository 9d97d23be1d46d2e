// Theme toggle: explicit choice overrides prefers-color-scheme and is remembered.
const button = document.getElementById("theme-toggle");

function effectiveTheme() {
  const chosen = document.documentElement.dataset.theme;
  if (chosen) return chosen;
  return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function paint() {
  if (!button) return;
  const dark = effectiveTheme() === "dark";
  button.setAttribute("aria-pressed", String(dark));
  button.textContent = dark ? "Light theme" : "Dark theme";
}

if (button) {
  button.addEventListener("click", () => {
    const next = effectiveTheme() === "dark" ? "light" : "dark";
    document.documentElement.dataset.theme = next;
    try { localStorage.setItem("theme", next); } catch (e) { /* not remembered */ }
    paint();
  });
  paint();
}
