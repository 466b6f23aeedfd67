#pragma once

// A small SVG plot for the report: a frame with axes from the data's range, lines, a band
// between two lines, bars, and labels. Written as text, so that the page needs nothing else.

#include <string>
#include <utility>
#include <vector>

namespace qtft::infer::detail {

// The reports' colours (matplotlib's first ones, which readers know), and a light grey for
// lines drawn only as context.
inline constexpr const char* kBlue = "#1f77b4";
inline constexpr const char* kOrange = "#ff7f0e";
inline constexpr const char* kGreen = "#2ca02c";
inline constexpr const char* kGrey = "#7f7f7f";
inline constexpr const char* kLightGrey = "#c7c7c7";

// Text safe inside HTML and SVG.
std::string escape_html(const std::string& text);

class SvgChart {
 public:
  SvgChart(int width, int height, std::string title);
  // The data's range on each axis; calls widen it, the drawing calls use it.
  void include(double x, double y);
  void include_y(double y);
  // Axis labels under and beside the plot, and tick texts for x (the ends, as given).
  void x_labels(std::string first, std::string last);
  void y_label(std::string label);

  // An empty name leaves the primitive out of the legend.
  void line(const std::vector<double>& x, const std::vector<double>& y, const std::string& color,
            const std::string& name, double width = 1.5, bool dashed = false);
  void band(const std::vector<double>& x, const std::vector<double>& low, const std::vector<double>& high,
            const std::string& color, const std::string& name);
  // Bars from 0 at each x, `bar_width` in x units.
  void bars(const std::vector<double>& x, const std::vector<double>& y, double bar_width, const std::string& color,
            const std::string& name);
  void horizontal_rule(double y, const std::string& color, const std::string& name);
  std::string svg() const;

 private:
  double px(double x) const;
  double py(double y) const;
  int width_, height_;
  std::string title_, x_first_, x_last_, y_label_;
  double x0_ = 0, x1_ = 0, y0_ = 0, y1_ = 0;
  bool has_x_ = false, has_y_ = false;
  struct Primitive {
    std::vector<double> x, y, y2;  // y2: a band's upper edge
    std::string color;
    double width = 1.0;  // a line's stroke, or bars' width in x units
    bool dashed = false;
  };
  std::vector<std::string> layers_;  // per primitive its kind: L line, B band, R bars, H rule
  std::vector<Primitive> primitives_;
  std::vector<std::pair<std::string, std::string>> legend_;  // name, color
};

// Horizontal bars, one row per name, heaviest first: the importances.
std::string horizontal_bars_svg(const std::vector<std::pair<std::string, double>>& rows, const std::string& title,
                                const std::string& color);

}  // namespace qtft::infer::detail
