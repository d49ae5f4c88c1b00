// allauth's WebAuthn script tells only the console when a passkey prompt fails or is cancelled
// (an "allauth.error" event): the page says it instead, in its alert (mfa/_passkey_scripts.html).
document.addEventListener("allauth.error", (event) => {
  const alert = document.getElementById("passkey-error");
  if (!alert) {
    return;
  }
  event.preventDefault();
  const name = event.detail && event.detail.exception ? event.detail.exception.name : "";
  alert.textContent = name === "NotAllowedError"
    ? "The passkey prompt was cancelled or timed out. Try again."
    : `This browser could not use a passkey here${name ? ` (${name})` : ""}. Try again, or use another way.`;
  alert.setAttribute("role", "alert");  // only once it says something (tests wait for alerts too)
  alert.hidden = false;
});
