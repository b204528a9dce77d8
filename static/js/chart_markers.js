// Markers on the time axis of uPlot charts (the service page's traffic, a release's span):
// a draw hook that strokes each marker as a dashed vertical line, and a cursor hook that
// writes the labels of the markers near the cursor into an element.
(function () {
  "use strict";
  var NEAR_PX = 6;

  window.graylaneChartMarkers = {
    // markers(): the current [{ts, kind, label}]; styles: kind -> {color, dash}.
    draw: function (markers, styles) {
      return function (u) {
        var ctx = u.ctx;
        ctx.save();
        markers().forEach(function (m) {
          var x = u.valToPos(m.ts, "x", true);
          if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) return;
          var style = styles[m.kind] || {};
          ctx.strokeStyle = style.color || "#b45309";
          ctx.setLineDash(style.dash || [4, 3]);
          ctx.lineWidth = 1.5;
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
        });
        ctx.restore();
      };
    },
    near: function (markers, info) {
      return function (u) {
        if (u.cursor.left == null || u.cursor.left < 0) return;
        info.textContent = markers().filter(function (m) {
          return Math.abs(u.valToPos(m.ts, "x") - u.cursor.left) <= NEAR_PX;
        }).map(function (m) {
          return new Date(m.ts * 1000).toISOString().substring(11, 19) + " " + m.label;
        }).join(" · ");
      };
    },
  };
})();
