// Figures as people read them, for rows added live: the rules of the template filters in
// dashboard/templatetags/display.py, kept in step with them.
(function () {
  "use strict";
  var MINUS = "\u2212";

  // `value` to `places` decimals (toFixed rounds halves away from zero), no trailing zeros.
  function fixed(value, places) {
    return String(Number(value.toFixed(places)));
  }

  window.graylaneNumbers = {
    // A change in percentage points, signed: "+1.5 pts", "−0.22 pts", "0 pts".
    points: function (value) {
      if (value == null) return "—";
      var text = fixed(value, 2);
      if (text === "0") return "0 pts";
      return (text.charAt(0) === "-" ? MINUS + text.substring(1) : "+" + text) + " pts";
    },
    // A percentage to a tenth: "33.3 %", "<0.1 %" for a rate that is there but small.
    rate: function (value) {
      if (value == null) return "—";
      if (value > 0 && value < 0.05) return "<0.1 %";
      return fixed(value, 1) + " %";
    },
    // A likelihood ratio in two significant digits, whole from 10, "2.3e-4" far from 1.
    ratio: function (value) {
      if (value == null) return "—";
      if (value === 0) return "0";
      if (value < 0.01 || value >= 1000) return value.toExponential(1).replace("e+", "e");
      if (value >= 10) return fixed(value, 0);
      return fixed(value, 1 - Math.floor(Math.log10(value)));
    },
    // "p=0.03", "p=0.004", "p<0.001".
    pValue: function (value) {
      if (value == null) return "p=—";
      if (value < 0.001) return "p<0.001";
      return "p=" + fixed(value, value >= 0.01 ? 2 : 3);
    },
  };
})();
